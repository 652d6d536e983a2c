package domain

import (
	"fmt"
	"path/filepath"
	"strings"
)

// InsideAny says whether p is one of roots or below one of them (paths
// compared as given: resolve links first where that matters).
func InsideAny(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// ContainsAny says whether dir is a parent of one of paths.
func ContainsAny(dir string, paths []string) bool {
	for _, p := range paths {
		if strings.HasPrefix(p, dir+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// BytesWord is n bytes in words for messages ("1.5 MiB", "512 bytes").
func BytesWord(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// WorkspaceOf is the workspace root of workspaces that holds dir, after
// resolving dir's links ("" when none does).
func WorkspaceOf(dir string, workspaces []string) string {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	for _, ws := range workspaces {
		if dir == ws || strings.HasPrefix(dir, strings.TrimSuffix(ws, "/")+"/") {
			return ws
		}
	}
	return ""
}
