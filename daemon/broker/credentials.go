package broker

import (
	"context"

	"github.com/termd/termd/daemon/broker/executions"
	"github.com/termd/termd/daemon/policy"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// credentialScopes are the credentials caller may ask for, for the policy
// (docs/CREDENTIALS.md; executions.CredentialScopes).
func (b *Broker) credentialScopes(caller *termdv1.Principal) map[string]policy.CredentialScope {
	return executions.CredentialScopes(b.Config(), caller)
}

// ListCredentials lists credentials without values: every one for
// operators, the ones an agent may ask for, none for viewers.
func (b *Broker) ListCredentials(_ context.Context, caller *termdv1.Principal) ([]*termdv1.CredentialInfo, error) {
	return executions.ListCredentials(b.Config(), caller), nil
}
