package hostfs

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// Workspace files are read under the same confinement as commands: inside a
// workspace root after symlinks, never termd's own files, text only, bounded.
const (
	maxWorkspaceFile = 256 << 10
	maxListPage      = 500
)

var skipDirs = map[string]bool{".git": true, "node_modules": true, ".run": true, "vendor": true, "__pycache__": true}

// confine resolves p (relative to the first root when relative) and checks
// it stays inside a workspace root and outside termd's protected paths.
func (h *FS) confine(p string) (string, error) {
	roots := h.Config().Workspaces
	if p == "" {
		return "", errdefs.Invalid("path is empty")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(roots[0], p)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(p))
	if err != nil {
		return "", errdefs.NotFound("%s: %v", p, unwrapPathErr(err))
	}
	if !domain.InsideAny(real, roots) {
		return "", errdefs.Permission("%s resolves to %s, outside the workspace roots (%s)", p, real, strings.Join(roots, ", "))
	}
	for _, prot := range h.Protected() {
		if pr, err := filepath.EvalSymlinks(prot); err == nil && (real == pr || strings.HasPrefix(real, pr+string(filepath.Separator))) {
			return "", errdefs.Permission("%s is one of termd's own files and cannot be read through the workspace", p)
		}
	}
	return real, nil
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ListWorkspaceFiles lists regular files under dir (default: every root), paginated.
func (h *FS) ListWorkspaceFiles(_ context.Context, caller *termdv1.Principal, r *termdv1.ListWorkspaceFilesRequest) (*termdv1.ListWorkspaceFilesResponse, error) {
	size := int(r.PageSize)
	if size <= 0 || size > maxListPage {
		size = 100
	}
	after := ""
	if r.PageToken != "" {
		raw, err := base64.RawURLEncoding.DecodeString(r.PageToken)
		if err != nil {
			return nil, errdefs.Invalid("page_token is not one this daemon issued; start without it")
		}
		after = string(raw)
	}
	roots := h.Config().Workspaces
	if r.Dir != "" {
		d, err := h.confine(r.Dir)
		if err != nil {
			return nil, err
		}
		roots = []string{d}
	}
	out := &termdv1.ListWorkspaceFilesResponse{}
	protected := map[string]bool{}
	for _, p := range h.Protected() {
		protected[p] = true
	}
	skip := func(path, name string) bool { return skipDirs[name] || protected[path] }
	for _, root := range roots {
		stop := false
		err := walkAsCaller(caller, root, skip, func(path string, bytes int64) bool {
			if path <= after {
				return true
			}
			if len(out.Files) >= size {
				out.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(out.Files[len(out.Files)-1].Path))
				stop = true
				return false
			}
			out.Files = append(out.Files, &termdv1.WorkspaceFile{Path: path, Size: bytes})
			return true
		})
		if err != nil && r.Dir != "" {
			return nil, errdefs.Permission("%s cannot be listed by %s: %v", r.Dir, caller.GetName(), err)
		}
		if stop {
			break
		}
	}
	return out, nil
}

// ReadWorkspaceFile reads one UTF-8 text file, redacted.
func (h *FS) ReadWorkspaceFile(_ context.Context, caller *termdv1.Principal, path string) (*termdv1.ReadWorkspaceFileResponse, error) {
	real, err := h.confine(path)
	if err != nil {
		return nil, err
	}
	f, err := openAsCaller(caller, real)
	if errors.Is(err, errNotReadable) {
		return nil, errdefs.Permission("%s is not readable by %s (uid %d); termd serves only what the caller could read itself", path, caller.GetName(), caller.GetUid())
	}
	if err != nil {
		return nil, errdefs.NotFound("%s: %v", path, unwrapPathErr(err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, errdefs.Internal("%s: %v", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, errdefs.Invalid("%s is not a regular file", path)
	}
	if st.Size() > maxWorkspaceFile {
		return nil, errdefs.Invalid("%s is %d bytes; files over %d bytes are not served (read a part with a command such as `head`)", path, st.Size(), maxWorkspaceFile)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxWorkspaceFile+1))
	if err != nil {
		return nil, errdefs.Internal("%s: %v", path, err)
	}
	if !utf8.Valid(data) || strings.ContainsRune(string(data), 0) {
		return nil, errdefs.Invalid("%s is not UTF-8 text", path)
	}
	text := h.Redactor.Redact(string(data))
	return &termdv1.ReadWorkspaceFileResponse{Path: real, Text: text, Size: st.Size(), Redacted: text != string(data)}, nil
}
