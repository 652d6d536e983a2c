package broker

import (
	"fmt"
	"strings"

	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// principalKey identifies a principal for ownership: the uid, plus the token
// name when the call came through the gateway on behalf of a token holder.
// A caller over the mutual-TLS listener is its certificate's entry
// ("cert:NAME"), or the person a gateway certificate named
// ("cert:GATEWAY/PERSON"), never the uid its commands run as: a certificate
// never owns what a local user of the same uid owns, nor the reverse.
func principalKey(p *termdv1.Principal) string {
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

func isOperator(p *termdv1.Principal) bool { return p.GetRole() == termdv1.Role_ROLE_OPERATOR }

// visible says whether caller may see something owned by owner. Operators and
// viewers see everything; an agent sees only its own.
func visible(caller, owner *termdv1.Principal) bool {
	switch caller.GetRole() {
	case termdv1.Role_ROLE_OPERATOR, termdv1.Role_ROLE_VIEWER:
		return true
	case termdv1.Role_ROLE_AGENT:
		return principalKey(caller) == principalKey(owner)
	}
	return false
}

// ownerOrOperator says whether caller may act on something owned by owner.
func ownerOrOperator(caller, owner *termdv1.Principal) bool {
	return isOperator(caller) || principalKey(caller) == principalKey(owner)
}

func roleWord(r termdv1.Role) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "ROLE_"))
}

// receiptPrincipal records a principal in a receipt.
func receiptPrincipal(p *termdv1.Principal) receipt.Principal {
	if p == nil {
		return receipt.Principal{Kind: "system", ID: "termd", Role: "system"}
	}
	uid, gid := int(p.Uid), int(p.Gid)
	rp := receipt.Principal{Kind: "unix", ID: principalKey(p), Role: roleWord(p.Role), UID: &uid, GID: &gid, Name: p.Name}
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
