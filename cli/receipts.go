package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/termd/termd/client"
	"github.com/termd/termd/internal/cmdline"
	termdv1 "github.com/termd/termd/proto/termd/v1"
)

func newReceipts(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "receipts",
		Short: "List, search, show, export and verify signed receipts; print the public key",
		Long: `Every plan that ends (ran, failed, timed out, was cancelled, denied or
blocked) gets a receipt: what ran, where, as whom, under which policy and
decision, who approved it, the outcome and its output, signed with termd's
Ed25519 key and chained to the previous receipt.

Verify one offline, anywhere, with the public key:
  termctl receipts public-key > termd.pub
  termctl receipts export RECEIPT_ID > receipt.json
  termctl receipts verify receipt.json --public-key termd.pub`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newReceiptsList(a), newReceiptsShow(a), newReceiptsExport(a), newReceiptsVerify(a), newReceiptsPublicKey(a), newReceiptsPrune(a), newReceiptsSearch(a), newReceiptsReindex(a))
	return cmd
}

func newReceiptsList(a *app) *cobra.Command {
	var (
		req    termdv1.ListReceiptsRequest
		filter receiptFilter
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List receipts, newest first, by session, status, time or principal",
		Example: `  termctl receipts list
  termctl receipts list --status failed --since 24h
  termctl receipts list --session 5e2b...a0 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if req.SessionId, req.Status, req.Principal, req.Since, req.Until, err = filter.values(); err != nil {
				return err
			}
			resp, printed, err := call(a, cmd, "listing receipts", func(ctx context.Context, c *client.Client) (*termdv1.ListReceiptsResponse, error) {
				return c.Receipts.ListReceipts(ctx, &req)
			})
			if printed || err != nil {
				return err
			}
			return listTable(a.stdout, resp.Receipts, "no receipts match", []string{"SEQ", "RECEIPT", "STATUS", "EXIT", "STARTED", "REQUESTER", "COMMAND"}, func(r *termdv1.ReceiptSummary) []string {
				exit := ""
				if r.FinishedAt != nil && (r.Status == "succeeded" || r.Status == "failed") {
					exit = fmt.Sprint(r.ExitCode)
				}
				return []string{fmt.Sprint(r.Seq), r.Id, r.Status, exit, fmtTime(r.StartedAt), r.Requester, truncate(r.Command, 60)}
			})
		},
	}
	filter.flags(cmd)
	f := cmd.Flags()
	f.Int32Var(&req.Limit, "limit", 50, "at most this many")
	f.Int32Var(&req.Offset, "offset", 0, "skip this many (for paging)")
	return cmd
}

// receiptFilter is the filter flags receipts list and search share.
type receiptFilter struct {
	session, status, principal string
	since, until               string
}

func (rf *receiptFilter) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&rf.session, "session", "", "only this session's receipts")
	f.StringVar(&rf.status, "status", "", "only this status (succeeded, failed, timed_out, cancelled, killed, output_limit, denied, blocked, expired, outcome_unknown)")
	f.StringVar(&rf.principal, "principal", "", "only receipts this principal requested or approved (e.g. uid:1000)")
	f.StringVar(&rf.since, "since", "", "only receipts from then on: a duration ago (24h) or a time (2006-01-02 or RFC 3339)")
	f.StringVar(&rf.until, "until", "", "only receipts before then (same forms as --since)")
}

// values is the filter as the request fields take it; a malformed --since
// or --until is a usage error.
func (rf *receiptFilter) values() (session, status, principal string, since, until *timestamppb.Timestamp, err error) {
	if since, err = parseWhen("--since", rf.since); err != nil {
		return
	}
	if until, err = parseWhen("--until", rf.until); err != nil {
		return
	}
	return rf.session, rf.status, rf.principal, since, until, nil
}

func parseWhen(flag, s string) (*timestamppb.Timestamp, error) {
	ts, err := client.ParseWhen(s)
	if err != nil {
		return nil, usageErr(fmt.Errorf("%s %q: give a duration ago (24h) or a time (2006-01-02, 2006-01-02 15:04:05, RFC 3339)", flag, s))
	}
	return ts, nil
}

func truncate(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func newReceiptsShow(a *app) *cobra.Command {
	var session string
	cmd := &cobra.Command{
		Use:               "show RECEIPT_ID",
		Short:             "Show one receipt (-o json prints it exactly as signed)",
		Args:              cobra.RangeArgs(0, 1),
		ValidArgsFunction: a.completeIDs(receiptIDs),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &termdv1.GetReceiptRequest{SessionId: session}
			if len(args) == 1 {
				req.ReceiptId = args[0]
			}
			if (req.ReceiptId == "") == (session == "") {
				return usageErr(fmt.Errorf("give a RECEIPT_ID or --session ID (its latest receipt)"))
			}
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			r, err := c.Receipts.GetReceipt(ctx, req)
			if err != nil {
				return fmt.Errorf("reading the receipt: %w", err)
			}
			switch a.output {
			case "json":
				_, err := fmt.Fprintln(a.stdout, strings.TrimSpace(r.ReceiptJson))
				return err
			case "yaml":
				var tree any
				if err := json.Unmarshal([]byte(r.ReceiptJson), &tree); err != nil {
					return err
				}
				_, err := a.printData(tree)
				return err
			}
			return printReceipt(a, r.ReceiptJson)
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "instead of an id: this session's latest receipt")
	return cmd
}

// printReceipt prints a receipt's members for a person: the main ones first,
// then the output.
func printReceipt(a *app, raw string) error {
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("the receipt is not JSON: %w", err)
	}
	str := func(k string) string {
		v, ok := m[k]
		if !ok || v == nil {
			return ""
		}
		switch t := v.(type) {
		case string:
			if strings.HasSuffix(k, "_at") {
				if ts, err := time.Parse(time.RFC3339Nano, t); err == nil {
					return ts.Local().Format(time.DateTime)
				}
			}
			return t
		case []any:
			parts := make([]string, len(t))
			for i, e := range t {
				parts[i] = fmt.Sprint(e)
			}
			return cmdline.Quote(parts)
		case map[string]any:
			// A principal: its name and role.
			if name, ok := t["name"].(string); ok {
				if role, ok := t["role"].(string); ok && role != "" {
					return name + " (" + role + ")"
				}
				return name
			}
			b, _ := json.Marshal(t)
			return string(b)
		}
		return fmt.Sprint(v)
	}
	pairs := []string{}
	shown := map[string]bool{"stdout": true, "stderr": true}
	for _, k := range []string{"id", "seq", "status", "exit_code", "signal", "command", "binary_path", "cwd", "mode", "decision", "risk", "requester", "approver", "started_at", "duration_ms", "request_hash", "key_id"} {
		if _, ok := m[k]; ok {
			pairs = append(pairs, strings.ReplaceAll(k, "_", " "), str(k))
			shown[k] = true
		}
	}
	if err := kv(a.stdout, pairs...); err != nil {
		return err
	}
	for _, s := range []string{"stdout", "stderr"} {
		if v := str(s); v != "" {
			fmt.Fprintf(a.stdout, "--- %s ---\n%s", s, v)
			if !strings.HasSuffix(v, "\n") {
				fmt.Fprintln(a.stdout)
			}
		}
	}
	fmt.Fprintln(a.stdout, "(-o json prints the whole signed receipt; `termctl receipts export ID` keeps it for verifying)")
	return nil
}

func newReceiptsExport(a *app) *cobra.Command {
	var (
		share, all   bool
		filter       termdv1.ExportReceiptsRequest
		since, until string
	)
	cmd := &cobra.Command{
		Use:   "export (RECEIPT_ID | --all [filters]) [--share]",
		Short: "Print a receipt as signed JSON, to keep or verify elsewhere",
		Long: `export prints a receipt exactly as signed, for ` + "`termctl receipts verify`" + ` anywhere.
With --share, the command, argv, working directory, stdout and stderr are
replaced by markers, sharing_redacted is set, and termd signs it again: safe
to paste into a ticket, still verifiable.

With --all, every receipt matching the filters is printed as JSON Lines (one
signed receipt per line, in chain order): ship them to a log pipeline, verify
them anywhere with the public key.`,
		Example: `  termctl receipts export 0b7e...31 > receipt.json
  termctl receipts export 0b7e...31 --share > receipt-shared.json
  termctl receipts export --all --since 24h > receipts.jsonl`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: a.completeIDs(receiptIDs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 1) {
				return usageErr(fmt.Errorf("give a RECEIPT_ID, or --all (with optional filters) for JSON Lines"))
			}
			if all {
				var err error
				if filter.Since, err = parseWhen("--since", since); err != nil {
					return err
				}
				if filter.Until, err = parseWhen("--until", until); err != nil {
					return err
				}
				filter.Share = share
				return a.exportJSONL(cmd, &filter)
			}
			ctx, c, err := a.dial(cmd)
			if err != nil {
				return err
			}
			r, err := c.Receipts.ExportReceipt(ctx, &termdv1.ExportReceiptRequest{ReceiptId: args[0], Share: share})
			if err != nil {
				return fmt.Errorf("exporting receipt %s: %w", args[0], err)
			}
			if a.output == "yaml" {
				var tree any
				if err := json.Unmarshal([]byte(r.ReceiptJson), &tree); err != nil {
					return err
				}
				_, err := a.printData(tree)
				return err
			}
			// The signed bytes as they are: verification canonicalizes anyway,
			// but a reader diffing files sees what was signed.
			_, err = fmt.Fprintln(a.stdout, string(bytes.TrimSpace([]byte(r.ReceiptJson))))
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&share, "share", false, "redact command, argv, cwd and output for sharing (re-signed)")
	f.BoolVar(&all, "all", false, "export every receipt matching the filters as JSON Lines")
	f.StringVar(&filter.SessionId, "session", "", "with --all: only this session's receipts")
	f.StringVar(&filter.Status, "status", "", "with --all: only this status")
	f.StringVar(&filter.Principal, "principal", "", "with --all: only receipts this principal requested or approved")
	f.StringVar(&since, "since", "", "with --all: from then on (24h, 2006-01-02, RFC 3339)")
	f.StringVar(&until, "until", "", "with --all: before then")
	return cmd
}

// exportJSONL streams receipts as compact JSON, one per line.
func (a *app) exportJSONL(cmd *cobra.Command, q *termdv1.ExportReceiptsRequest) error {
	ctx, c, err := a.dial(cmd)
	if err != nil {
		return err
	}
	st, err := c.Receipts.ExportReceipts(ctx, q)
	if err != nil {
		return fmt.Errorf("exporting receipts: %w", err)
	}
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("exporting receipts: %w", err)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(m.ReceiptJson)); err != nil {
			return err
		}
		buf.WriteByte('\n')
		if _, err := a.stdout.Write(buf.Bytes()); err != nil {
			return err
		}
	}
}

func newReceiptsPublicKey(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "public-key",
		Short: "Print the receipt signing public keys (PEM), for offline verification",
		Long: `public-key prints every receipt signing public key as a plain SPKI PEM block,
the current key first (older keys still verify older receipts). OpenSSL reads
it as is (openssl pkey -pubin -in termd.pub -noout -text). Key ids are derived
from the keys (the first 8 bytes of SHA-256 of the raw key, in hex); they are
printed on stderr, and receipts name theirs in signatures[].key_id.`,
		Example: `  termctl receipts public-key > termd.pub
  termctl receipts verify receipt.json --public-key termd.pub`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, printed, err := call(a, cmd, "reading the public key", func(ctx context.Context, c *client.Client) (*termdv1.GetPublicKeyResponse, error) {
				return c.Receipts.GetPublicKey(ctx, &termdv1.GetPublicKeyRequest{})
			})
			if printed || err != nil {
				return err
			}
			// Current key first; rotated keys still verify older receipts.
			for _, cur := range []bool{true, false} {
				for _, k := range r.Keys {
					if k.Current == cur {
						// The PEM is plain SPKI (openssl pkey -pubin reads it);
						// its key id goes to stderr, out of the file.
						fmt.Fprintf(a.stderr, "termctl: key id %s%s\n", k.KeyId, map[bool]string{true: " (current)", false: " (rotated; verifies older receipts)"}[cur])
						fmt.Fprint(a.stdout, k.Pem)
						if !strings.HasSuffix(k.Pem, "\n") {
							fmt.Fprintln(a.stdout)
						}
					}
				}
			}
			return nil
		},
	}
}
