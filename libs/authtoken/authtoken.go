// Package authtoken stores client authentication tokens as salted PBKDF2
// hashes and checks a presented token against one in constant time.
//
// A hash is one text value, safe in YAML, environment variables and comma
// separated lists:
//
//	pbkdf2-sha256$<iterations>$<salt>$<key>
//
// salt (16 bytes) and key (32 bytes) in unpadded base64url. Only the hash is
// ever configured; the token itself never reaches a configuration file or
// the broker's memory beyond the request that carries it. `strata auth
// hash-token` prints a hash (Hash).
package authtoken

import (
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

const (
	scheme = "pbkdf2-sha256"
	// DefaultIterations is the PBKDF2-HMAC-SHA256 work factor of a new hash
	// (OWASP's 2023 recommendation for this function).
	DefaultIterations = 600_000
	// MinIterations is the smallest work factor a configured hash may have;
	// below it a leaked configuration is too cheap to brute force.
	MinIterations = 10_000
	// MaxIterations bounds the work a configured hash can ask of every
	// authentication attempt.
	MaxIterations = 10_000_000
	saltLen       = 16
	keyLen        = 32
)

// Hash is a parsed token hash.
type Hash struct {
	Iterations int
	Salt, Key  []byte
}

var b64 = base64.RawURLEncoding

// New hashes token with a fresh random salt and the given work factor
// (DefaultIterations when 0).
func New(token string, iterations int) (Hash, error) {
	if iterations == 0 {
		iterations = DefaultIterations
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return Hash{}, fmt.Errorf("authtoken: iterations must be between %d and %d", MinIterations, MaxIterations)
	}
	if token == "" {
		return Hash{}, fmt.Errorf("authtoken: the token is empty")
	}
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return Hash{}, err
	}
	key, err := pbkdf2.Key(sha256.New, token, salt, iterations, keyLen)
	if err != nil {
		return Hash{}, err
	}
	return Hash{Iterations: iterations, Salt: salt, Key: key}, nil
}

// String is the configuration form of h.
func (h Hash) String() string {
	return scheme + "$" + strconv.Itoa(h.Iterations) + "$" + b64.EncodeToString(h.Salt) + "$" + b64.EncodeToString(h.Key)
}

// Parse reads the configuration form of a hash.
func Parse(s string) (Hash, error) {
	parts := strings.Split(s, "$")
	if len(parts) != 4 || parts[0] != scheme {
		return Hash{}, fmt.Errorf("authtoken: a token hash has the form %s$<iterations>$<salt>$<key> (strata auth hash-token prints one)", scheme)
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n < MinIterations || n > MaxIterations {
		return Hash{}, fmt.Errorf("authtoken: iterations %q must be an integer between %d and %d", parts[1], MinIterations, MaxIterations)
	}
	salt, err := b64.DecodeString(parts[2])
	if err != nil || len(salt) < saltLen {
		return Hash{}, fmt.Errorf("authtoken: the salt must be at least %d bytes of unpadded base64url", saltLen)
	}
	key, err := b64.DecodeString(parts[3])
	if err != nil || len(key) != keyLen {
		return Hash{}, fmt.Errorf("authtoken: the key must be %d bytes of unpadded base64url", keyLen)
	}
	return Hash{Iterations: n, Salt: salt, Key: key}, nil
}

// Verify reports whether token hashes to h. The derived key is compared in
// constant time; the PBKDF2 work is the same for any token of a given hash.
func (h Hash) Verify(token string) bool {
	key, err := pbkdf2.Key(sha256.New, token, h.Salt, h.Iterations, keyLen)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(key, h.Key) == 1
}
