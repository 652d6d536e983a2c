package domain

import (
	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// ReceiptVisible says whether caller may see receipt r: operators and
// viewers see every receipt; an agent sees those of its own requests.
func ReceiptVisible(caller *termdv1.Principal, r *receipt.Receipt) bool {
	switch caller.GetRole() {
	case termdv1.Role_ROLE_OPERATOR, termdv1.Role_ROLE_VIEWER:
		return true
	}
	return r.Requester.ID == PrincipalKey(caller)
}
