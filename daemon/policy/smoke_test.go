package policy

import "testing"

func TestSmoke(t *testing.T) {
	p := Default()
	ws := t.TempDir()
	for _, c := range []string{"ls -la", "git log -p", "git -p log", "find . -exec rm {} ;", "rm -rf .", "make", "bash -c 'find . -delete'", "sudo ls", "./ls", "/usr/bin/ls", "go test ./...", "curl file:///etc/passwd", "cat /etc/passwd", "cat /etc/shadow", "touch .git/hooks/pre-commit", "sed -n 1e f", "awk 'BEGIN{system(\"id\")}'", "printf hi", "echo a|b"} {
		d := p.Decide(Request{Command: c, Cwd: ws}, Context{Workspaces: []string{ws}})
		t.Logf("%-40s %s %s %v %v", c, d.Verdict, d.Risk, d.Reasons, d.Rules)
	}
}
