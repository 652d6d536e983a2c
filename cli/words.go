package cli

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// The words below are the lowercase names users and scripts see for the
// API's enums ("allow", "low", "awaiting_approval"): stable, no prefixes.

func verdictWord(v termdv1.Verdict) string {
	return enumWord(v.String(), "VERDICT_")
}

func riskWord(r termdv1.Risk) string {
	return enumWord(r.String(), "RISK_")
}

func planStateWord(s termdv1.PlanState) string {
	return enumWord(s.String(), "PLAN_STATE_")
}

func execStateWord(s termdv1.ExecutionState) string {
	return enumWord(s.String(), "EXECUTION_STATE_")
}

func eventKindWord(k termdv1.EventKind) string {
	return enumWord(k.String(), "EVENT_KIND_")
}

func streamWord(s termdv1.OutputStream) string {
	return enumWord(s.String(), "OUTPUT_STREAM_")
}

func enumWord(s, prefix string) string {
	s = strings.ToLower(strings.TrimPrefix(s, prefix))
	if s == "unspecified" {
		return ""
	}
	return s
}

func parseMode(s string) (termdv1.Mode, error) {
	switch strings.ToLower(s) {
	case "":
		return termdv1.Mode_MODE_UNSPECIFIED, nil
	case "inspect":
		return termdv1.Mode_MODE_INSPECT, nil
	case "confirm":
		return termdv1.Mode_MODE_CONFIRM, nil
	case "trusted":
		return termdv1.Mode_MODE_TRUSTED, nil
	}
	return 0, fmt.Errorf("--mode %q: choose inspect, confirm or trusted", s)
}

func parseStream(s string) (termdv1.OutputStream, error) {
	switch strings.ToLower(s) {
	case "", "stdout":
		return termdv1.OutputStream_OUTPUT_STREAM_STDOUT, nil
	case "stderr":
		return termdv1.OutputStream_OUTPUT_STREAM_STDERR, nil
	}
	return 0, fmt.Errorf("--stream %q: choose stdout or stderr", s)
}

func fmtTime(ts *timestamppb.Timestamp) string {
	if ts == nil || (ts.Seconds == 0 && ts.Nanos == 0) {
		return ""
	}
	return ts.AsTime().Local().Format(time.DateTime)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func principalWord(p *termdv1.Principal) string {
	if p == nil {
		return ""
	}
	s := p.Name
	if s == "" {
		s = fmt.Sprintf("uid:%d", p.Uid)
	}
	if r := roleWord(p.Role); r != "" && r != "unspecified" {
		s += " (" + r + ")"
	}
	if p.Via != "" {
		s += " via " + p.Via
	}
	return s
}
