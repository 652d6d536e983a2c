package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/cmdline"
	"github.com/termd/termd/internal/policyjson"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// checkJSON is `termctl policy check -o json`: stable snake_case fields and
// lowercase words, for scripts.
type checkJSON struct {
	Decision         string            `json:"decision"`
	Risk             string            `json:"risk"`
	Reasons          []string          `json:"reasons"`
	Rules            []string          `json:"rules"`
	RequestHash      string            `json:"request_hash"`
	ResolvedPath     string            `json:"resolved_path"`
	BinarySHA256     string            `json:"binary_sha256,omitempty"`
	Argv             []string          `json:"argv"`
	Cwd              string            `json:"cwd,omitempty"`
	Env              map[string]string `json:"env,omitempty"`
	Mode             string            `json:"mode,omitempty"`
	Network          bool              `json:"network"`
	ReadOnly         bool              `json:"read_only"`
	RunsProjectCode  bool              `json:"runs_project_code"`
	Writes           []string          `json:"writes"`
	TimeoutSeconds   uint32            `json:"timeout_seconds,omitempty"`
	PolicyVersion    string            `json:"policy_version,omitempty"`
	Sandbox          checkSandbox      `json:"sandbox"`
	Steps            []policyjson.Step `json:"steps,omitempty"`
	CanonicalRequest json.RawMessage   `json:"canonical_request,omitempty"`
}

// checkSandbox is the plan's sandbox profile (the daemon's own type; its
// cache directories are not shown) and what the daemon enforces of it.
type checkSandbox struct {
	policyjson.Profile
	Enforcement string `json:"enforcement"`
}

func newPolicy(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Check commands against the policy, show, lint and reload it",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newPolicyCheck(a), newPolicyShow(a), newPolicyLint(a), newPolicyReload(a))
	return cmd
}

func newPolicyCheck(a *app) *cobra.Command {
	var rf requestFlags
	var explain bool
	cmd := &cobra.Command{
		Use:   "check [flags] -- ARGV...",
		Short: "Ask what the policy would decide for a command (creates nothing)",
		Long: `check asks termd's policy what it would decide for a command, without making
a plan or running anything, and explains why.

Exit status: 0 allow, 3 ask (needs approval), 4 deny, 2 usage error, 1 error.
-o json prints decision, risk, reasons, rules, request_hash, resolved_path and
the canonical request, with lowercase words ("allow", "ask", "deny";
"low" ... "critical").`,
		Example: `  termctl policy check -- rm -rf build
  termctl policy check --mode trusted -- touch notes.txt
  termctl policy check -o json --command "git push" | jq .decision`,
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := rf.build(args)
			if err != nil {
				return err
			}
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			resp, err := c.Policy.CheckPolicy(ctx, &termdv1.CheckPolicyRequest{Request: req})
			if err != nil {
				return fmt.Errorf("checking the policy: %w", err)
			}
			d := resp.GetDecision()
			out := checkOutput(resp)
			if ok, err := a.printData(out); ok {
				if err != nil {
					return err
				}
			} else if err := a.printCheck(out, explain, resp.CanonicalRequest); err != nil {
				return err
			}
			switch d.GetVerdict() {
			case termdv1.Verdict_VERDICT_ALLOW:
				return nil
			case termdv1.Verdict_VERDICT_ASK:
				return exitWith(ExitAsk, nil)
			case termdv1.Verdict_VERDICT_DENY:
				return exitWith(ExitDeny, nil)
			}
			return fmt.Errorf("termd answered with an unknown verdict %v", d.GetVerdict())
		},
	}
	rf.register(cmd, false, true)
	cmd.Flags().BoolVar(&explain, "explain", false, "also show each step the policy took and the canonical request")
	return cmd
}

// checkOutput is the daemon's answer to CheckPolicy as `policy check` shows it.
func checkOutput(resp *termdv1.CheckPolicyResponse) checkJSON {
	d := resp.GetDecision()
	out := checkJSON{
		Decision:        verdictWord(d.GetVerdict()),
		Risk:            riskWord(d.GetRisk()),
		Reasons:         nonNil(d.GetReasons()),
		Rules:           nonNil(d.GetRules()),
		RequestHash:     d.GetRequestHash(),
		ResolvedPath:    d.GetResolvedPath(),
		BinarySHA256:    d.GetBinarySha256(),
		Argv:            nonNil(d.GetArgv()),
		Cwd:             d.GetCwd(),
		Env:             d.GetEnv(),
		Mode:            modeWord(d.GetMode()),
		Network:         d.GetNetwork(),
		ReadOnly:        d.GetReadOnly(),
		RunsProjectCode: d.GetRunsProjectCode(),
		Writes:          nonNil(d.GetWrites()),
		TimeoutSeconds:  d.GetTimeoutSeconds(),
		PolicyVersion:   d.GetPolicyVersion(),
	}
	if sb := d.GetSandbox(); sb != nil {
		out.Sandbox = checkSandbox{Profile: policyjson.Profile{Profile: sb.Profile, Network: sb.Network, NetworkMode: sb.NetworkMode, Exec: sb.Exec, Read: sb.Read, Write: sb.Write}, Enforcement: sb.Enforcement}
	}
	for _, s := range d.GetSteps() {
		out.Steps = append(out.Steps, policyjson.Step{Name: s.Name, Outcome: s.Outcome, Detail: s.Detail})
	}
	if json.Valid([]byte(resp.CanonicalRequest)) {
		out.CanonicalRequest = json.RawMessage(resp.CanonicalRequest)
	}
	return out
}

func (a *app) printCheck(out checkJSON, explain bool, canonical string) error {
	w := a.stdout
	var effects []string
	if out.ReadOnly {
		effects = append(effects, "read-only")
	}
	if len(out.Writes) > 0 {
		effects = append(effects, "writes "+strings.Join(out.Writes, ", "))
	}
	if out.Network {
		effects = append(effects, "uses the network")
	}
	if out.RunsProjectCode {
		effects = append(effects, "runs project code")
	}
	if err := kv(w,
		"decision", a.verdictColor(w, out.Decision),
		"risk", out.Risk,
		"command", cmdline.Quote(out.Argv),
		"program", out.ResolvedPath,
		"cwd", out.Cwd,
		"mode", out.Mode,
		"effects", strings.Join(effects, "; "),
		"sandbox", client.SandboxWords(out.Sandbox.Profile.Profile, out.Sandbox.NetworkMode, out.Sandbox.Network, out.Sandbox.Enforcement),
		"rules", strings.Join(out.Rules, ", "),
		"policy", out.PolicyVersion,
		"request hash", out.RequestHash,
	); err != nil {
		return err
	}
	if len(out.Reasons) > 0 {
		fmt.Fprintln(w, "reasons:")
		for _, r := range out.Reasons {
			fmt.Fprintln(w, "  -", r)
		}
	}
	if explain {
		if len(out.Steps) > 0 {
			fmt.Fprintln(w, "steps:")
			rows := make([][]string, 0, len(out.Steps))
			for _, s := range out.Steps {
				rows = append(rows, []string{"  " + s.Name, s.Outcome, s.Detail})
			}
			if err := table(w, nil, rows); err != nil {
				return err
			}
		}
		if canonical != "" {
			fmt.Fprintln(w, "canonical request:")
			fmt.Fprintln(w, " ", canonical)
		}
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func newPolicyShow(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Print the active policy and where it came from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, printed, err := call(a, cmd, "reading the policy", func(ctx context.Context, c *client.Client) (*termdv1.GetPolicyResponse, error) {
				return c.Policy.GetPolicy(ctx, &termdv1.GetPolicyRequest{})
			})
			if printed || err != nil {
				return err
			}
			var lim []string
			if l := p.Limits; l != nil {
				if l.TimeoutSeconds > 0 {
					lim = append(lim, fmt.Sprintf("timeout %ds", l.TimeoutSeconds))
				}
				if l.OutputBytes > 0 {
					lim = append(lim, fmt.Sprintf("output %d bytes", l.OutputBytes))
				}
				if l.MemoryBytes > 0 {
					lim = append(lim, fmt.Sprintf("memory %d bytes", l.MemoryBytes))
				}
				if l.Pids > 0 {
					lim = append(lim, fmt.Sprintf("%d processes", l.Pids))
				}
			}
			if err := kv(a.stdout,
				"version", p.Version,
				"source", p.Source,
				"default mode", modeWord(p.DefaultMode),
				"network", map[bool]string{true: "allowed", false: "denied"}[p.NetworkAllowed],
				"trusted PATH", strings.Join(p.TrustedPath, ":"),
				"environment", strings.Join(p.EnvAllowlist, " "),
				"limits", strings.Join(lim, ", "),
				"sandboxed writes", sandboxedWritesWords(p.SandboxedWorkspaceWrites),
			); err != nil {
				return err
			}
			if p.Text != "" {
				fmt.Fprintln(a.stdout)
				fmt.Fprint(a.stdout, p.Text)
				if !strings.HasSuffix(p.Text, "\n") {
					fmt.Fprintln(a.stdout)
				}
			}
			return nil
		},
	}
}

// maxPolicyText is the largest policy termd loads (4 MiB), checked here so
// a larger file is named before it is sent.
const maxPolicyText = 4 << 20

func newPolicyLint(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "lint FILE",
		Short: "Check a policy file before installing it, examples included",
		Long: `lint sends a policy file to termd, which checks it the way it would load it,
strictly and with every example it carries (match / not_match), and installs
nothing; the first problem is printed as FILE:LINE: reason. Lint before you
reload. With no daemon running, ` + "`termd policy lint FILE`" + ` checks the file
the same way on the machine termd is installed on.`,
		Example: `  termctl policy lint /etc/termd/policy.yaml && termctl policy reload
  termd policy lint policy.yaml     # no daemon needed`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := args[0]
			text, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if len(text) > maxPolicyText {
				return fmt.Errorf("%s: policy file too large (%d bytes; termd loads at most 4 MiB)", file, len(text))
			}
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			r, err := c.LintPolicy(ctx, file, text)
			if err != nil {
				if client.Code(err) == codes.Unavailable {
					return fmt.Errorf("linting %s: %w; `termd policy lint %s` checks it with no daemon", file, err, file)
				}
				return fmt.Errorf("linting %s: %w", file, err)
			}
			if !r.Valid {
				return errors.New(r.Problem)
			}
			if ok, err := a.printData(map[string]any{"file": file, "ok": true}); ok {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "%s: ok\n", file)
			return err
		},
	}
}

func newPolicyReload(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "reload",
		Short: "Make termd reload its policy file (operators); a bad file keeps the last good policy",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, printed, err := call(a, cmd, "reloading the policy (the last good policy stays active)", func(ctx context.Context, c *client.Client) (*termdv1.ReloadPolicyResponse, error) {
				return c.Policy.ReloadPolicy(ctx, &termdv1.ReloadPolicyRequest{})
			})
			if printed || err != nil {
				return err
			}
			if !r.Changed {
				_, err = fmt.Fprintf(a.stdout, "policy unchanged (%s)\n", r.Version)
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "policy reloaded: %s (was %s)\n", r.Version, r.PreviousVersion)
			return err
		},
	}
}

// sandboxedWritesWords explains the policy setting sandboxed_workspace_writes.
func sandboxedWritesWords(v string) string {
	switch v {
	case "allow":
		return "allow (sandboxed_workspace_writes: plain writes inside the workspace, like sed -i or git commit, run without approval in confirm mode under a fully enforced sandbox)"
	case "ask":
		return "ask (sandboxed_workspace_writes: every write asks in confirm mode, sandbox or not)"
	}
	return v
}
