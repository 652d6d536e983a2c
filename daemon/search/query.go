package search

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Query is one search. The phrase is literal text: FTS5 syntax in it
// (OR, NEAR, *, -, :, ^, quotes) is searched for as written. Filters are
// bound as parameters.
type Query struct {
	Phrase    string
	SessionID string
	Status    string
	// Principal matches the requester or the approver.
	Principal string
	// Requester, when set, keeps only receipts this principal requested
	// (the broker sets it for callers who see only their own receipts).
	Requester    string
	Since, Until time.Time
	Limit        int
	PageToken    string
}

// Limits of a page.
const (
	DefaultLimit = 20
	MaxLimit     = 100
	MaxPhrase    = 1000 // bytes
)

// Match is one receipt the phrase occurs in.
type Match struct {
	Seq int64
	ID  string
}

// Page is one page of matches, newest first.
type Page struct {
	Matches []Match
	// NextPageToken continues after the last match ("" on the last page).
	NextPageToken string
}

// ErrInvalid wraps problems with a query the caller can fix.
var ErrInvalid = errors.New("invalid search")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// Check validates q and fills its defaults.
func (q *Query) Check() error {
	switch {
	case strings.TrimSpace(q.Phrase) == "":
		return invalid(`the search phrase is empty: give the text to look for, e.g. termctl receipts search "go test"`)
	case len(q.Phrase) > MaxPhrase:
		return invalid("the search phrase is %d bytes; at most %d are searched for", len(q.Phrase), MaxPhrase)
	case !utf8.ValidString(q.Phrase):
		return invalid("the search phrase is not valid UTF-8")
	case q.Limit < 0:
		return invalid("limit must not be negative")
	case q.Limit > MaxLimit:
		return invalid("limit %d is over %d hits per page; page on with the page token", q.Limit, MaxLimit)
	}
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	if q.PageToken != "" {
		if _, err := pageSeq(q.PageToken); err != nil {
			return err
		}
	}
	return nil
}

// A page token is the seq the next page starts below; "s" marks its kind.
func pageSeq(tok string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimPrefix(tok, "s"), 10, 64)
	if !strings.HasPrefix(tok, "s") || err != nil || n <= 0 {
		return 0, invalid("page token %q is not one this search returned: pass next_page_token from the previous page, or none for the first page", tok)
	}
	return n, nil
}

// Search returns one page of receipts the phrase occurs in, newest first.
// Phrases of three characters or more are answered by the trigram index;
// shorter ones (`*`, `-f`) by a scan of the indexed text, since a trigram
// index cannot hold them.
func (x *Index) Search(q Query) (*Page, error) {
	if err := q.Check(); err != nil {
		return nil, err
	}
	var where []string
	var args []any
	if utf8.RuneCountInString(q.Phrase) >= 3 {
		// One FTS5 string: inside double quotes every character is text
		// (a quote is written twice), so nothing in it is an operator.
		where = append(where, "fts MATCH ?")
		args = append(args, `"`+strings.ReplaceAll(q.Phrase, `"`, `""`)+`"`)
	} else {
		like := "%" + escapeLike(q.Phrase) + "%"
		where = append(where, `(fts.command LIKE ? ESCAPE '\' OR fts.reasons LIKE ? ESCAPE '\' OR fts.output LIKE ? ESCAPE '\')`)
		args = append(args, like, like, like)
	}
	add := func(cond string, v ...any) {
		where = append(where, cond)
		args = append(args, v...)
	}
	if q.SessionID != "" {
		add("d.session_id = ?", q.SessionID)
	}
	if q.Status != "" {
		add("d.status = ?", q.Status)
	}
	if q.Principal != "" {
		add("(d.requester = ? OR d.approver = ?)", q.Principal, q.Principal)
	}
	if q.Requester != "" {
		add("d.requester = ?", q.Requester)
	}
	if !q.Since.IsZero() {
		add("d.started_ns >= ?", q.Since.UnixNano())
	}
	if !q.Until.IsZero() {
		add("d.started_ns < ?", q.Until.UnixNano())
	}
	if q.PageToken != "" {
		below, _ := pageSeq(q.PageToken)
		add("d.seq < ?", below)
	}
	args = append(args, q.Limit+1)
	stmt := `SELECT d.seq, d.id FROM fts JOIN docs d ON d.seq = fts.rowid WHERE ` +
		strings.Join(where, " AND ") + ` ORDER BY d.seq DESC LIMIT ?`

	x.mu.Lock()
	defer x.mu.Unlock()
	if x.db == nil {
		return nil, ErrUnavailable
	}
	rows, err := x.db.Query(stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("search index: %w", err)
	}
	defer rows.Close()
	page := &Page{}
	for rows.Next() {
		var m Match
		if err := rows.Scan(&m.Seq, &m.ID); err != nil {
			return nil, err
		}
		page.Matches = append(page.Matches, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("search index: %w", err)
	}
	if len(page.Matches) > q.Limit {
		page.Matches = page.Matches[:q.Limit]
		page.NextPageToken = "s" + strconv.FormatInt(page.Matches[q.Limit-1].Seq, 10)
	}
	return page, nil
}

func escapeLike(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(s)
}

// snippetRunes is about how much text a snippet shows around the match.
const snippetRunes = 60

// Snippet finds the phrase in the fields of a receipt (the redacted text it
// holds) and returns the first field it occurs in and a short excerpt
// around it on one line. ok is false when the phrase is not there (the
// receipt changed since it was indexed, which a store never does, or the
// fold differs from the index's).
func Snippet(fields map[string]string, phrase string) (field, snippet string, ok bool) {
	for _, f := range []string{FieldCommand, FieldOutput, FieldReasons} {
		text := fields[f]
		i := indexFold(text, phrase)
		if i < 0 {
			continue
		}
		start, end := i, i+len(phrase)
		for n := 0; n < snippetRunes && start > 0; n++ {
			_, sz := utf8.DecodeLastRuneInString(text[:start])
			start -= sz
		}
		for n := 0; n < snippetRunes && end < len(text); n++ {
			_, sz := utf8.DecodeRuneInString(text[end:])
			end += sz
		}
		s := strings.Join(strings.Fields(text[start:end]), " ")
		if start > 0 {
			s = "…" + s
		}
		if end < len(text) {
			s += "…"
		}
		return f, s, true
	}
	return "", "", false
}

// indexFold is the byte offset of the first case-insensitive occurrence of
// sub in s, or -1.
func indexFold(s, sub string) int {
	if i := strings.Index(s, sub); i >= 0 {
		return i
	}
	n := len(sub)
	for i := 0; i+n <= len(s); {
		if strings.EqualFold(s[i:i+n], sub) {
			return i
		}
		_, sz := utf8.DecodeRuneInString(s[i:])
		i += sz
	}
	return -1
}
