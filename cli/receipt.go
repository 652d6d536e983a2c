package cli

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	termdv1 "github.com/termd/termd/proto/termd/v1"
	"github.com/termd/termd/receipt"
)

// verifyJSON is `termctl receipts verify -o json`.
type verifyJSON struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"` // JSON Lines: the line's number, from 1
	Valid   bool   `json:"valid"`
	ID      string `json:"id,omitempty"`
	Seq     int64  `json:"seq,omitempty"`
	Status  string `json:"status,omitempty"`
	KeyID   string `json:"key_id,omitempty"`
	Problem string `json:"problem,omitempty"`
}

// newReceipt is the old spelling `termctl receipt verify`, kept hidden so
// scripts and notes that use it keep working; `termctl receipts verify` is
// the one noun.
func newReceipt(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:    "receipt",
		Short:  "Old spelling of `termctl receipts verify`",
		Hidden: true,
		Args:   cobra.NoArgs,
	}
	cmd.AddCommand(newReceiptsVerify(a))
	return cmd
}

// newReceiptsVerify is `termctl receipts verify`: offline verification of a
// receipt file.
func newReceiptsVerify(a *app) *cobra.Command {
	var keyFile string
	verify := &cobra.Command{
		Use:   "verify FILE [--public-key FILE]",
		Short: "Check a receipt's schema and Ed25519 signature",
		Long: `verify checks a receipt file (from ` + "`termctl receipts export`" + `) against the
receipt 1.0 schema and its Ed25519 signature over the RFC 8785 canonical JSON.
Any change to any member fails it.

With --public-key FILE (PEM from ` + "`termctl receipts public-key`" + `, or the JSON key
format) it works offline, without termd. Without it, termctl asks termd for
its public keys. FILE may be - for stdin.

FILE may also be JSON Lines from ` + "`termctl receipts export --all`" + `: every line is
verified, and where two lines are consecutive in the chain (seq n and n+1,
neither a share export) the second's prev_hash must name the first, so a
line removed, altered or reordered inside a run is found.

Exit status: 0 valid, 1 not valid (the message says why).`,
		Example: `  termctl receipts verify receipt.json --public-key termd.pub
  termctl receipts export 0b7e...31 | termctl receipts verify -
  termctl receipts export --all > all.jsonl; termctl receipts verify all.jsonl --public-key termd.pub`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readFileOrStdin(a, args[0])
			if err != nil {
				return err
			}
			if lines := jsonLines(data); len(lines) > 1 {
				return a.verifyJSONLines(cmd, args[0], lines, keyFile)
			}
			res := verifyJSON{File: args[0]}
			// A file that is no receipt at all is said so before any key is needed.
			verr := receipt.CheckIsReceipt(data)
			if verr == nil {
				keys, err := a.receiptKeys(cmd, keyFile)
				if err != nil {
					return err
				}
				var r *receipt.Receipt
				r, verr = receipt.VerifyJSON(data, keys)
				if r != nil {
					res.ID, res.Seq, res.Status, res.KeyID = r.ID, r.Seq, string(r.Status), r.KeyID
				}
			}
			if verr != nil {
				res.Problem = verr.Error()
			} else {
				res.Valid = true
			}
			if ok, err := a.printData(res); ok {
				if err != nil {
					return err
				}
				if !res.Valid {
					return exitWith(ExitError, nil)
				}
				return nil
			}
			if !res.Valid {
				return exitWith(ExitError, fmt.Errorf("%s: NOT valid: %v", args[0], verr))
			}
			_, err = fmt.Fprintf(a.stdout, "%s: valid receipt %s (seq %d, %s), signed by key %s\n", args[0], res.ID, res.Seq, res.Status, res.KeyID)
			return err
		},
	}
	verify.Flags().StringVar(&keyFile, "public-key", "", "public key FILE to verify with, offline (default: ask termd)")
	return verify
}

func readFileOrStdin(a *app, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(a.stdin)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, errors.Unwrap(err))
	}
	return data, nil
}

// receiptKeys reads the public keys from a file, or asks the daemon.
func (a *app) receiptKeys(cmd *cobra.Command, file string) (map[string]ed25519.PublicKey, error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading the public key: %w", err)
		}
		keys, err := receipt.ParsePublicKeyFile(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		return keys, nil
	}
	ctx, c, err := a.dial(cmd)
	if err != nil {
		return nil, err
	}
	r, err := c.Receipts.GetPublicKey(ctx, &termdv1.GetPublicKeyRequest{})
	if err != nil {
		return nil, fmt.Errorf("asking termd for its public key (or verify offline with --public-key FILE): %w", err)
	}
	keys := map[string]ed25519.PublicKey{}
	for _, k := range r.Keys {
		got, err := receipt.ParsePublicKeyFile([]byte(k.Pem))
		if err != nil {
			return nil, fmt.Errorf("termd's public key %s: %w", k.KeyId, err)
		}
		for id, pk := range got {
			keys[id] = pk
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("termd returned no public keys")
	}
	return keys, nil
}

// jsonLines splits a JSON Lines document into its non-empty lines; a single
// receipt, even pretty-printed over many lines, is one (it starts with "{"
// and only its first line does).
func jsonLines(data []byte) [][]byte {
	var out [][]byte
	for _, l := range bytes.Split(data, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if len(l) == 0 {
			continue
		}
		if l[0] != '{' || !json.Valid(l) {
			return nil // not JSON Lines: verified as one document
		}
		out = append(out, l)
	}
	return out
}

// verifyJSONLines verifies each line of an `export --all` file, and the
// chain links between lines that are consecutive in it.
func (a *app) verifyJSONLines(cmd *cobra.Command, file string, lines [][]byte, keyFile string) error {
	keys, err := a.receiptKeys(cmd, keyFile)
	if err != nil {
		return err
	}
	results := make([]verifyJSON, 0, len(lines))
	var prev *receipt.Receipt
	prevHash, bad := "", 0
	for i, l := range lines {
		res := verifyJSON{File: file, Line: i + 1}
		r, verr := receipt.VerifyJSON(l, keys)
		if r != nil {
			res.ID, res.Seq, res.Status, res.KeyID = r.ID, r.Seq, string(r.Status), r.KeyID
			if verr == nil && prev != nil && r.Seq == prev.Seq+1 && !r.SharingRedacted && !prev.SharingRedacted && r.PrevHash != prevHash {
				verr = fmt.Errorf("prev_hash does not name the receipt on line %d (seq %d): a receipt between them was altered or the lines were edited", i, prev.Seq)
			}
		}
		if verr != nil {
			res.Problem = verr.Error()
			bad++
		} else {
			res.Valid = true
		}
		results = append(results, res)
		prev, prevHash = nil, ""
		if r != nil && verr == nil {
			if canon, err := receipt.Canonicalize(l); err == nil {
				prev, prevHash = r, receipt.ChainHash(canon)
			}
		}
	}
	if ok, err := a.printData(results); ok {
		if err != nil {
			return err
		}
		if bad > 0 {
			return exitWith(ExitError, nil)
		}
		return nil
	}
	for _, res := range results {
		if !res.Valid {
			fmt.Fprintf(a.stdout, "%s:%d: NOT valid: %s\n", file, res.Line, res.Problem)
		}
	}
	if bad > 0 {
		return exitWith(ExitError, fmt.Errorf("%s: %d of %d receipts NOT valid", file, bad, len(results)))
	}
	_, err = fmt.Fprintf(a.stdout, "%s: %d valid receipts (seq %d to %d), chain links checked between consecutive lines\n", file, len(results), results[0].Seq, results[len(results)-1].Seq)
	return err
}
