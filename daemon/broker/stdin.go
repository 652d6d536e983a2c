package broker

import (
	"os"

	"github.com/termd/termd/daemon/broker/executions"
	"github.com/termd/termd/daemon/domain"
	"github.com/termd/termd/daemon/errdefs"
	"github.com/termd/termd/daemon/policy"
)

// stdinFile opens the command's standard input: the plan's stdin, checked
// to be what was planned, in a file of its private TMPDIR
// (executions.StdinFile). nil: the plan has none (the runner gives
// /dev/null).
func (b *Broker) stdinFile(e *execRec, d policy.Decision, tmp string, uid, gid int) (*os.File, error) {
	if d.Stdin == nil {
		return nil, nil
	}
	data := e.stdin
	e.stdin = nil
	if int64(len(data)) != d.Stdin.Bytes || b.Keys.Digest(data) != d.Stdin.SHA256 {
		return nil, errdefs.Precondition("the plan's stdin (%s) is no longer held by termd; plan the command again with its input", domain.BytesWord(d.Stdin.Bytes))
	}
	return executions.StdinFile(data, tmp, uid, gid)
}
