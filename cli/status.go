package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newStatus(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the daemon's version, uptime, policy and your role",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			st, err := c.Status(ctx)
			if err != nil {
				return err
			}
			if ok, err := a.printData(st); ok {
				return err
			}
			who := ""
			if p := st.Caller; p != nil {
				who = fmt.Sprintf("%s (uid %d) as %s", p.Name, p.Uid, roleWord(p.Role))
			}
			adviser := "available"
			if !st.AdviserAvailable {
				adviser = st.AdviserDetail
				if adviser == "" {
					adviser = "unavailable"
				}
			}
			sandbox := "unknown (daemon too old to say)"
			for _, c := range st.Capabilities {
				if c.Name == "sandbox" {
					sandbox = c.Detail
				}
			}
			return kv(a.stdout,
				"termd", st.Version,
				"socket", c.Socket,
				"uptime", (time.Duration(st.UptimeSeconds) * time.Second).String(),
				"you", who,
				"policy", strings.TrimSpace(st.PolicyVersion+" "+paren(st.PolicySource)),
				"mode", modeWord(st.DefaultMode),
				"workspaces", strings.Join(st.Workspaces, ", "),
				"sessions", fmt.Sprint(st.ActiveSessions),
				"executions", fmt.Sprint(st.ActiveExecutions),
				"receipts", fmt.Sprint(st.Receipts),
				"receipt key", st.ReceiptKeyId,
				"sandbox", sandbox,
				"adviser", adviser,
				"console", st.ConsoleUrl,
			)
		},
	}
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

func roleWord(r termdv1.Role) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "ROLE_"))
}

func modeWord(m termdv1.Mode) string {
	if m == termdv1.Mode_MODE_UNSPECIFIED {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(m.String(), "MODE_"))
}
