package connect

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/renameio/v2"

	"github.com/agent-box/agent-box/session"
)

// cache is what connect keeps of a box between its runs: the box's answer
// to initialize and its tool list. A client whose initialize fails does
// not try again (the reason connect exists), so when the box cannot be
// reached as the client starts, connect answers from the cache of the
// last contact: the agent has its tools, and each call says the box is
// unreachable, in ssh's words, until it is back.
type cache struct {
	path string
}

// cached is the cache file's content.
type cached struct {
	Version    int             `json:"version"`
	Asked      string          `json:"asked_protocol_version"` // the client's, which the answer negotiated
	Initialize json.RawMessage `json:"initialize"`
	Tools      json.RawMessage `json:"tools,omitempty"`
	At         time.Time       `json:"at"`
}

const (
	cacheVersion = 1
	maxCache     = 4 << 20
)

// cacheFor is the cache of box in dir, one file per transport command;
// nil when dir is "" (no cache).
func cacheFor(dir string, box session.Box) *cache {
	if dir == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(strings.Join(box.Argv, "\x00")))
	return &cache{path: filepath.Join(dir, hex.EncodeToString(sum[:12])+".json")}
}

// load reads the cache, defensively: a file that is not a regular file,
// is too large or does not parse is no cache.
func (c *cache) load() (cached, error) {
	var v cached
	if c == nil {
		return v, errors.New("no cache")
	}
	f, err := os.OpenFile(c.path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return v, err
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return v, err
	case !st.Mode().IsRegular():
		return v, fmt.Errorf("%s is not a regular file", c.path)
	case st.Size() > maxCache:
		return v, fmt.Errorf("%s is larger than %d bytes", c.path, maxCache)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCache+1))
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("%s: %w", c.path, err)
	}
	if v.Version != cacheVersion || len(v.Initialize) == 0 {
		return v, fmt.Errorf("%s: not a cache of this agent-box", c.path)
	}
	return v, nil
}

// save replaces the cache atomically.
func (c *cache) save(v cached) error {
	if c == nil {
		return nil
	}
	v.Version = cacheVersion
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return err
	}
	return renameio.WriteFile(c.path, b, 0o600)
}
