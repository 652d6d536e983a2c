package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newPlan(a *app) *cobra.Command {
	var rf requestFlags
	cmd := &cobra.Command{
		Use:   "plan [flags] -- ARGV...",
		Short: "Decide a command by policy and record it as a plan (nothing runs)",
		Long: `plan sends a command to termd, which decides it by policy and records it as a
plan. Nothing runs. The plan says whether the command may run now (allow),
needs an operator's approval (ask) or is blocked (deny), how risky it is,
why, what it may write, and what to do next.

Give the command as ARGV after --, each word one argument (no shell), or as
one string with --command.`,
		Example: `  termctl plan -- ls -la
  termctl plan --cwd ./src --timeout 5m -- make test
  termctl plan --command "git status --short"
  termctl plan -o json -- touch notes.txt`,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, _, err := a.plan(cmd, &rf, args)
			if err != nil {
				return err
			}
			if ok, err := a.printData(p); ok {
				return err
			}
			return a.printPlan(a.stdout, p)
		},
	}
	rf.register(cmd, true, true)
	return cmd
}

// printPlan writes a plan for a person: what was decided, why, and what next.
func (a *app) printPlan(w io.Writer, p *termdv1.Plan) error {
	d := p.GetDecision()
	pv := p.GetPreview()
	argv := d.GetArgv()
	if len(argv) == 0 {
		argv = p.GetRequest().GetArgv()
	}
	command := cmdline.Quote(argv)
	if command == "" {
		command = p.GetRequest().GetCommand()
	}
	var effects []string
	if pv.GetReadOnly() {
		effects = append(effects, "read-only")
	}
	if len(pv.GetWrites()) > 0 {
		effects = append(effects, "writes "+strings.Join(pv.GetWrites(), ", "))
	}
	if pv.GetNetwork() {
		effects = append(effects, "uses the network")
	}
	if pv.GetRunsProjectCode() {
		effects = append(effects, "runs project code")
	}
	timeout := ""
	if d.GetTimeoutSeconds() > 0 {
		timeout = fmt.Sprintf("%ds", d.GetTimeoutSeconds())
	}
	err := kv(w,
		"plan", p.Id,
		"session", p.SessionId,
		"state", planStateWord(p.State),
		"decision", a.verdictColor(w, verdictWord(d.GetVerdict())),
		"risk", riskWord(d.GetRisk()),
		"command", command,
		"program", d.GetResolvedPath(),
		"cwd", d.GetCwd(),
		"credentials", strings.Join(credentialNames(p), " "),
		"privileged", privilegedWords(d.GetPrivileged() || p.GetRequest().GetPrivileged()),
		"stdin", stdinWords(d.GetStdin()),
		"mode", modeWord(d.GetMode()),
		"timeout", timeout,
		"effects", strings.Join(effects, "; "),
		"sandbox", client.SandboxWords(d.GetSandbox().GetProfile(), d.GetSandbox().GetNetworkMode(), d.GetSandbox().GetNetwork(), d.GetSandbox().GetEnforcement()),
		"network", d.GetSandbox().GetNetworkMode(),
		"summary", pv.GetSummary(),
		"rules", strings.Join(d.GetRules(), ", "),
		"request hash", d.GetRequestHash(),
		"expires", fmtTime(p.ExpiresAt),
		"replanned from", p.ReplannedFrom,
	)
	if err != nil {
		return err
	}
	if rs := d.GetReasons(); len(rs) > 0 {
		fmt.Fprintln(w, "reasons:")
		for _, r := range rs {
			fmt.Fprintln(w, "  -", r)
		}
	}
	if p.FlaggedByAdviser {
		fmt.Fprintln(w, "flagged by the adviser: needs approval in every mode")
	}
	if p.NextStep != "" {
		fmt.Fprintln(w, "next:", p.NextStep)
	}
	return nil
}

// privilegedWords says what a privileged plan holds ("" when it is not).
func privilegedWords(on bool) string {
	if !on {
		return ""
	}
	return "yes: runs as real host root (no user namespace), approved by a person every time"
}

// stdinWords describes a plan's standard input ("" when it reads /dev/null).
func stdinWords(in *termdv1.StdinInfo) string {
	if in == nil {
		return ""
	}
	return fmt.Sprintf("%d bytes (keyed sha256 %s)", in.GetBytes(), in.GetSha256())
}

// credentialNames are the credentials a plan receives (the request's when
// the policy refused it before deciding them).
func credentialNames(p *termdv1.Plan) []string {
	if c := p.GetDecision().GetCredentials(); len(c) > 0 {
		return c
	}
	return p.GetRequest().GetCredentials()
}

// canonicalLines writes the canonical request a plan stands for: what an
// approver approves, field by field, ending with its hash.
func canonicalLines(w io.Writer, p *termdv1.Plan) error {
	d := p.GetDecision()
	var env []string
	for k, v := range d.GetEnv() {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	timeout := ""
	if d.GetTimeoutSeconds() > 0 {
		timeout = fmt.Sprintf("%ds", d.GetTimeoutSeconds())
	}
	execArgv := ""
	if ea := d.GetExecArgv(); len(ea) > 0 && cmdline.Quote(ea) != cmdline.Quote(d.GetArgv()) {
		execArgv = cmdline.Quote(ea)
	}
	return kv(w,
		"  argv", cmdline.Quote(d.GetArgv()),
		"  runs as argv", execArgv,
		"  program", d.GetResolvedPath(),
		"  program sha256", d.GetBinarySha256(),
		"  cwd", d.GetCwd(),
		"  env", strings.Join(env, " "),
		"  credentials", strings.Join(d.GetCredentials(), " "),
		"  mode", modeWord(d.GetMode()),
		"  timeout", timeout,
		"  network", yesNo(d.GetNetwork()),
		"  network mode", d.GetSandbox().GetNetworkMode(),
		"  run as", d.GetRunAs(),
		"  privileged", privilegedWords(d.GetPrivileged()),
		"  stdin", stdinWords(d.GetStdin()),
		"  policy", d.GetPolicyVersion(),
		"  decision", verdictWord(d.GetVerdict())+" ("+riskWord(d.GetRisk())+")",
		"  request hash", d.GetRequestHash(),
	)
}
