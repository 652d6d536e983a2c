package gateway

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/termd/termd/internal/token"

	termdv1 "github.com/termd/termd/proto/termd/v1"
)

// MinTokenLen is the shortest bearer token accepted: 32 random bytes in
// unpadded base64url. Shorter tokens are refused at start, not warned about.
const MinTokenLen = token.MinLen

// Token is one bearer token and the scope it grants. The gateway dials one
// daemon connection per token, lowered to Role and named "token:Name".
type Token struct {
	Name  string
	Role  termdv1.Role
	Value string
}

// FileConfig is the optional YAML config file (--config).
type FileConfig struct {
	Tokens []struct {
		Name      string `yaml:"name"`
		TokenFile string `yaml:"token_file"`
		Role      string `yaml:"role"`
	} `yaml:"tokens"`
	// Extra Host header values accepted besides the listen address (e.g. a TLS name).
	AllowedHosts []string `yaml:"allowed_hosts"`
	// Extra Origin values accepted besides the gateway's own origins.
	AllowedOrigins []string `yaml:"allowed_origins"`
	RateLimit      struct {
		PerSecond float64 `yaml:"per_second"`
		Burst     int     `yaml:"burst"`
	} `yaml:"rate_limit"`
	BodyLimitBytes   int64  `yaml:"body_limit_bytes"`
	HeartbeatSeconds int    `yaml:"heartbeat_seconds"`
	TLSCert          string `yaml:"tls_cert"`
	TLSKey           string `yaml:"tls_key"`
}

// LoadFileConfig reads a gateway config file. Unknown keys are refused so a
// typo never silently drops a security setting.
func LoadFileConfig(path string) (*FileConfig, error) {
	return loadStrictYAML[FileConfig]("gateway config", path)
}

// loadStrictYAML reads the gateway's YAML file of one kind (what: its name
// in errors), refusing unknown keys; an empty file is the zero T.
func loadStrictYAML[T any](what, path string) (*T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	var v T
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&v); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return &v, nil
}

// ConfigTokens loads the tokens a config file lists. Each file must exist,
// be private (no group or other access) and hold a long enough token.
func (fc *FileConfig) ConfigTokens() ([]Token, error) {
	var out []Token
	for i, t := range fc.Tokens {
		if t.Name == "" || t.TokenFile == "" {
			return nil, fmt.Errorf("tokens[%d]: name and token_file are required", i)
		}
		role, err := ParseRole(t.Role)
		if err != nil {
			return nil, fmt.Errorf("token %q: %w", t.Name, err)
		}
		v, err := ReadTokenFile(t.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("token %q: %w", t.Name, err)
		}
		out = append(out, Token{Name: t.Name, Role: role, Value: v})
	}
	return out, nil
}

// ParseRole accepts viewer, agent or operator.
func ParseRole(s string) (termdv1.Role, error) {
	switch strings.ToLower(strings.TrimPrefix(strings.ToUpper(s), "ROLE_")) {
	case "viewer":
		return termdv1.Role_ROLE_VIEWER, nil
	case "agent":
		return termdv1.Role_ROLE_AGENT, nil
	case "operator":
		return termdv1.Role_ROLE_OPERATOR, nil
	}
	return 0, fmt.Errorf("role %q is not viewer, agent or operator", s)
}

// ReadTokenFile reads a token file (token.ReadFile); a weak token's error
// says that the gateway makes a new one when the file is gone.
func ReadTokenFile(path string) (string, error) {
	v, err := token.ReadFile(path)
	if errors.Is(err, token.ErrWeak) {
		return "", fmt.Errorf("%w (or delete the token file to have a new one generated)", err)
	}
	return v, err
}

// CheckToken refuses tokens too short or too regular to resist guessing.
func CheckToken(v string) error {
	if err := token.Check(v); err != nil {
		return fmt.Errorf("%w (or delete the token file to have a new one generated)", err)
	}
	return nil
}

// NewTokenValue returns 32 random bytes as unpadded base64url.
func NewTokenValue() string { return token.New() }

// LoadOrCreateTokenFile reads path, or creates it (mode 0600, parent 0700)
// with a new random token when it does not exist. created reports which.
func LoadOrCreateTokenFile(path string) (value string, created bool, err error) {
	v, err := ReadTokenFile(path)
	if err == nil {
		return v, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, err
	}
	v = NewTokenValue()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("creating token file: %w", err)
	}
	if _, err := f.WriteString(v + "\n"); err != nil {
		f.Close()
		return "", false, err
	}
	if err := f.Close(); err != nil {
		return "", false, err
	}
	return v, true, nil
}

// DefaultTokenFile is where the token lives when --token-file is not given.
func DefaultTokenFile() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "termd", "gateway.token")
}

// heartbeat returns the configured heartbeat or the default.
func heartbeatOr(d time.Duration) time.Duration {
	if d <= 0 {
		return 15 * time.Second
	}
	return d
}
