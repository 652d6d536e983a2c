package broker

import (
	"context"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// ListWorkspaceFiles lists regular files under dir (default: every root),
// paginated, as the caller could list them (daemon/broker/hostfs).
func (b *Broker) ListWorkspaceFiles(ctx context.Context, caller *termdv1.Principal, r *termdv1.ListWorkspaceFilesRequest) (*termdv1.ListWorkspaceFilesResponse, error) {
	return b.fs.ListWorkspaceFiles(ctx, caller, r)
}

// ReadWorkspaceFile reads one UTF-8 text file the caller could read, redacted.
func (b *Broker) ReadWorkspaceFile(ctx context.Context, caller *termdv1.Principal, path string) (*termdv1.ReadWorkspaceFileResponse, error) {
	return b.fs.ReadWorkspaceFile(ctx, caller, path)
}

// StorageUsage is what the storage budgets are measured against now.
func (b *Broker) StorageUsage() (free, storedDay int64) { return b.fs.StorageUsage() }
