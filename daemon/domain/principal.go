package domain

import (
	"fmt"
	"strings"

	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// PrincipalKey identifies a principal for ownership: the uid, plus the token
// name when the call came through the gateway on behalf of a token holder.
// A caller over the mutual-TLS listener is its certificate's entry
// ("cert:NAME"), or the person a gateway certificate named
// ("cert:GATEWAY/PERSON"), never the uid its commands run as: a certificate
// never owns what a local user of the same uid owns, nor the reverse.
func PrincipalKey(p *termdv1.Principal) string {
	if p == nil {
		return ""
	}
	if p.Cert != "" {
		if p.Gateway != "" {
			return "cert:" + p.Gateway + "/" + p.Name
		}
		return "cert:" + p.Cert
	}
	if strings.HasPrefix(p.Name, "token:") {
		return p.Name
	}
	return fmt.Sprintf("uid:%d", p.Uid)
}

func IsOperator(p *termdv1.Principal) bool { return p.GetRole() == termdv1.Role_ROLE_OPERATOR }

// Visible says whether caller may see something owned by owner. Operators and
// viewers see everything; an agent sees only its own.
func Visible(caller, owner *termdv1.Principal) bool {
	switch caller.GetRole() {
	case termdv1.Role_ROLE_OPERATOR, termdv1.Role_ROLE_VIEWER:
		return true
	case termdv1.Role_ROLE_AGENT:
		return PrincipalKey(caller) == PrincipalKey(owner)
	}
	return false
}

// OwnerOrOperator says whether caller may act on something owned by owner.
func OwnerOrOperator(caller, owner *termdv1.Principal) bool {
	return IsOperator(caller) || PrincipalKey(caller) == PrincipalKey(owner)
}

// RoleWord is a role as one lower-case word (agent, operator, viewer).
func RoleWord(r termdv1.Role) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "ROLE_"))
}

// ReceiptPrincipal records a principal in a receipt.
func ReceiptPrincipal(p *termdv1.Principal) receipt.Principal {
	if p == nil {
		return receipt.Principal{Kind: "system", ID: "termd", Role: "system"}
	}
	uid, gid := int(p.Uid), int(p.Gid)
	rp := receipt.Principal{Kind: "unix", ID: PrincipalKey(p), Role: RoleWord(p.Role), UID: &uid, GID: &gid, Name: p.Name}
	if strings.HasPrefix(p.Name, "token:") {
		rp.Kind = "token"
	}
	if p.Cert != "" {
		rp.Kind, rp.Gateway = "cert", p.Gateway
	}
	if p.Via != "" {
		rp.Name = p.Name + " via " + p.Via
	}
	return rp
}
