package routes

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// CacheConfig is a model route's exact-match response cache (docs/cache.md).
// Absent (nil) is off: a route without it does no cache work at all.
type CacheConfig struct {
	// TTL is how long an answer is served from the cache: 1s..7d, default
	// DefaultCacheTTL. A client's x-gateway-cache-ttl may only shorten it.
	TTL Duration `yaml:"ttl"`
	// MaxEntryBytes bounds one stored answer; a larger one is not stored.
	// Written plain or with KiB/MiB; default DefaultCacheMaxEntryBytes,
	// at most MaxCacheEntryBytes.
	MaxEntryBytes ByteSize `yaml:"max_entry_bytes"`
	// Scope is who shares an entry: client (the default: only the client
	// that stored it), team (every client of its team) or shared (every
	// client of the route).
	Scope string `yaml:"scope"`
}

// Cache scopes.
const (
	CacheScopeClient = "client"
	CacheScopeTeam   = "team"
	CacheScopeShared = "shared"
)

// Cache defaults and bounds.
const (
	DefaultCacheTTL           = 10 * time.Minute
	MaxCacheTTL               = 7 * 24 * time.Hour
	DefaultCacheMaxEntryBytes = 1 << 20
	MaxCacheEntryBytes        = 16 << 20
)

// ByteSize is a byte count written plain (1048576) or with a KiB, MiB or
// GiB suffix (1MiB).
type ByteSize int64

// UnmarshalYAML reads a byte count; the caller adds the path and line.
func (s *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	var v string
	if err := n.Decode(&v); err != nil {
		return errors.New("expected a byte count (like 1048576 or 1MiB)")
	}
	t := strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	c, err := strconv.ParseInt(t, 10, 64)
	if err != nil || c < 0 || c > (1<<40)/mult {
		return fmt.Errorf("%s is not a byte count (write it like 1048576, 512KiB or 1MiB)", quoteShort(v))
	}
	*s = ByteSize(c * mult)
	return nil
}

// cache checks and completes a model route's cache block at path.
func (v *validator) cache(c *CacheConfig, path string) error {
	switch c.Scope {
	case "":
		c.Scope = CacheScopeClient
	case CacheScopeClient, CacheScopeTeam, CacheScopeShared:
	default:
		return v.fail(path+".scope", ": %s is unknown (known: client, team, shared)%s",
			quoteShort(c.Scope), suggest(c.Scope, []string{CacheScopeClient, CacheScopeTeam, CacheScopeShared}))
	}
	if _, written := v.lines[path+".ttl"]; !written {
		c.TTL = Duration(DefaultCacheTTL)
	}
	if d := time.Duration(c.TTL); d < time.Second || d > MaxCacheTTL {
		return v.fail(path+".ttl", " must be between 1s and 168h (7 days), got %s", d)
	}
	if _, written := v.lines[path+".max_entry_bytes"]; !written {
		c.MaxEntryBytes = DefaultCacheMaxEntryBytes
	}
	if n := c.MaxEntryBytes; n < 1 || n > MaxCacheEntryBytes {
		return v.fail(path+".max_entry_bytes", " must be between 1 and 16MiB, got %d", n)
	}
	return nil
}
