package receiptstore

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/termd/termd/receipt"
)

// Files in the key directory.
const (
	ed25519KeyFile = "receipt-ed25519.pem" // PKCS#8 private key, 0600
	hmacKeyFile    = "receipt-hmac.key"    // 32 random bytes, hex, 0600
	digestKeyFile  = "receipt-digest.key"  // 32 random bytes, hex, 0600
	pubKeysDir     = "keys"                // <key_id>.pub, every public key ever used
)

// Keys holds the receipt signing keys: the current Ed25519 key, every older
// Ed25519 public key (so old receipts still verify after Rotate), the HMAC
// signing key and the digest key. None of them is the HTTP bearer token.
type Keys struct {
	dir string

	mu      sync.RWMutex
	priv    ed25519.PrivateKey
	keyID   string
	pubs    map[string]ed25519.PublicKey
	hmacKey []byte
	digKey  []byte
}

// LoadOrCreateKeys loads the keys from dir, creating any that do not exist
// (first start). It refuses to start when a private key file can be read or
// written by group or others, or is not a regular file.
func LoadOrCreateKeys(dir string) (*Keys, error) {
	if err := os.MkdirAll(filepath.Join(dir, pubKeysDir), 0o700); err != nil {
		return nil, fmt.Errorf("receipt keys: %w", err)
	}
	k := &Keys{dir: dir, pubs: map[string]ed25519.PublicKey{}}

	privPEM, err := readPrivateFile(filepath.Join(dir, ed25519KeyFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := k.generateEd25519(); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		if err := k.setPrivatePEM(privPEM); err != nil {
			return nil, err
		}
	}
	if k.hmacKey, err = loadOrCreateSecret(filepath.Join(dir, hmacKeyFile)); err != nil {
		return nil, err
	}
	if k.digKey, err = loadOrCreateSecret(filepath.Join(dir, digestKeyFile)); err != nil {
		return nil, err
	}
	if hmac.Equal(k.hmacKey, k.digKey) {
		return nil, errors.New("receipt keys: HMAC signing key and digest key must differ")
	}
	if err := k.loadPublicKeys(); err != nil {
		return nil, err
	}
	// Make sure the current public key is archived too.
	if err := k.archivePublic(k.keyID, k.priv.Public().(ed25519.PublicKey)); err != nil {
		return nil, err
	}
	return k, nil
}

// checkPrivatePerm refuses private key files readable or writable by group
// or others.
func checkPrivatePerm(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("receipt keys: %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("receipt keys: %s has mode %04o; a private key must not be accessible by group or others: run `chmod 600 %s`", path, perm, path)
	}
	return nil
}

func readPrivateFile(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if err := checkPrivatePerm(path, fi); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// WriteFileAtomic writes data to path via a temp file, fsync and rename, and
// fsyncs the directory, so a crash leaves the old or the new file (the keys
// here, the OTLP exporter's cursor).
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeFileAtomic(path, data, perm)
}

func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func loadOrCreateSecret(path string) ([]byte, error) {
	data, err := readPrivateFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if err := writeFileAtomic(path, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("receipt keys: %w", err)
		}
		return key, nil
	}
	if err != nil {
		return nil, err
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(key) < 32 {
		return nil, fmt.Errorf("receipt keys: %s must hold at least 32 bytes as hex", path)
	}
	return key, nil
}

func (k *Keys) generateEd25519() error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if err := writeFileAtomic(filepath.Join(k.dir, ed25519KeyFile), data, 0o600); err != nil {
		return fmt.Errorf("receipt keys: %w", err)
	}
	k.priv = priv
	k.keyID = receipt.KeyIDFor(priv.Public().(ed25519.PublicKey))
	return nil
}

func (k *Keys) setPrivatePEM(data []byte) error {
	blk, _ := pem.Decode(data)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return fmt.Errorf("receipt keys: %s is not a PEM PRIVATE KEY", ed25519KeyFile)
	}
	key, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return fmt.Errorf("receipt keys: %s: %w", ed25519KeyFile, err)
	}
	priv, ok := key.(ed25519.PrivateKey)
	if !ok {
		return fmt.Errorf("receipt keys: %s is not an Ed25519 key", ed25519KeyFile)
	}
	k.priv = priv
	k.keyID = receipt.KeyIDFor(priv.Public().(ed25519.PublicKey))
	return nil
}

func (k *Keys) loadPublicKeys() error {
	entries, err := os.ReadDir(filepath.Join(k.dir, pubKeysDir))
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pub") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(k.dir, pubKeysDir, e.Name()))
		if err != nil {
			return err
		}
		keys, err := receipt.ParsePublicKeyFile(data)
		if err != nil {
			return fmt.Errorf("receipt keys: %s: %w", e.Name(), err)
		}
		for id, pk := range keys {
			k.pubs[id] = pk
		}
	}
	return nil
}

func (k *Keys) archivePublic(id string, pub ed25519.PublicKey) error {
	k.pubs[id] = pub
	path := filepath.Join(k.dir, pubKeysDir, id+".pub")
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	return writeFileAtomic(path, receipt.PublicKeyPEMFor(id, pub), 0o644)
}

// Rotate makes a new current Ed25519 key. The old public key stays in the
// keys/ directory and in PublicKeys, so receipts it signed still verify.
func (k *Keys) Rotate() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.archivePublic(k.keyID, k.priv.Public().(ed25519.PublicKey)); err != nil {
		return err
	}
	if err := k.generateEd25519(); err != nil {
		return err
	}
	return k.archivePublic(k.keyID, k.priv.Public().(ed25519.PublicKey))
}

// KeyID is the id of the current signing key.
func (k *Keys) KeyID() string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.keyID
}

// PublicKeys returns every Ed25519 public key by key id, current and old.
func (k *Keys) PublicKeys() map[string]ed25519.PublicKey {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make(map[string]ed25519.PublicKey, len(k.pubs))
	for id, pk := range k.pubs {
		out[id] = pk
	}
	return out
}

// PublicKeyPEM returns all public keys as PEM "PUBLIC KEY" blocks (PKIX),
// each with a Key-Id header, the current key first. ParsePublicKeyFile reads
// it back.
func (k *Keys) PublicKeyPEM() []byte {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := receipt.PublicKeyPEMFor(k.keyID, k.pubs[k.keyID])
	ids := make([]string, 0, len(k.pubs))
	for id := range k.pubs {
		if id != k.keyID {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		out = append(out, receipt.PublicKeyPEMFor(id, k.pubs[id])...)
	}
	return out
}

// HMACKey returns the HMAC signing key, for Verify inside the daemon.
func (k *Keys) HMACKey() []byte { return append([]byte(nil), k.hmacKey...) }

// Digest is the keyed digest (HMAC-SHA256 with the digest key, lowercase
// hex) used for command_sha256 and the stream digests, so that short secrets
// cannot be recovered by hashing guesses.
func (k *Keys) Digest(data []byte) string {
	h := k.NewDigest()
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// NewDigest returns a streaming form of Digest; hex-encode its Sum.
func (k *Keys) NewDigest() hash.Hash { return hmac.New(sha256.New, k.digKey) }

// Signer is the current signing key, for receipt.Signer's Sign and
// Prepare. A later Rotate does not change a Signer already taken.
func (k *Keys) Signer() receipt.Signer {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return receipt.Signer{KeyID: k.keyID, Ed25519: k.priv, HMAC: k.hmacKey}
}

// Sign signs r with the current key (see receipt.Signer.Sign).
func (k *Keys) Sign(r *receipt.Receipt) error { return k.Signer().Sign(r) }
