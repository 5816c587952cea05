package report

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"time"

	"github.com/google/uuid"
)

// Spool frame: [payload length uint32 LE][CRC-32C of payload uint32 LE][payload].
// The payload starts with a format version and the record kind, followed by the
// fields in a fixed order (varints and length-prefixed strings). The CRC lets a
// reader tell a torn or corrupt tail from data, the length lets it skip one record
// it cannot decode (written by a newer version) without losing the rest.
const (
	frameHeader = 8
	// spoolVersion 2 added cost and the usage details at the end of both
	// kinds (appendCost); version 1 frames still decode, those zero.
	// Version 3 adds a request's trace id after its cost, version 4 its
	// cache result and saving after that.
	spoolVersion   = 4
	maxSpoolRecord = 64 << 10 // far above any sanitised record; larger means corruption
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

var errBadPayload = errors.New("malformed spool record")

// appendFrame encodes rec as one frame onto buf.
func appendFrame(buf []byte, rec *record) []byte {
	start := len(buf)
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0) // header, filled in below
	buf = append(buf, spoolVersion, byte(rec.kind))
	switch rec.kind {
	case kindRequest:
		buf = appendRequest(buf, &rec.req)
	case kindCandidate:
		buf = appendCandidate(buf, &rec.cand)
	}
	payload := buf[start+frameHeader:]
	binary.LittleEndian.PutUint32(buf[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(payload, crcTable))
	return buf
}

func appendRequest(b []byte, r *Request) []byte {
	b = append(b, r.ID[:]...)
	b = appendString(b, r.ClientRequestID)
	b = appendTime(b, r.CreatedAt)
	b = appendString(b, r.Model)
	b = appendBool(b, r.Stream)
	b = appendString(b, r.Client)
	b = appendString(b, r.Priority)
	b = appendString(b, r.Status)
	b = binary.AppendVarint(b, int64(r.StatusCode))
	b = appendString(b, r.ErrorType)
	b = binary.AppendVarint(b, int64(r.Latency))
	b = binary.AppendVarint(b, int64(r.FirstByte))
	b = binary.AppendVarint(b, int64(r.CandidateCount))
	b = appendBool(b, r.HasUsage)
	b = binary.AppendVarint(b, r.PromptTokens)
	b = binary.AppendVarint(b, r.CompletionTokens)
	b = binary.AppendVarint(b, r.TotalTokens)
	b = appendTime(b, r.FinishedAt)
	// Last, so frames spooled by a version without routes (or replicas)
	// still decode: each field added later goes after the ones before it.
	b = appendString(b, r.Route)
	b = appendString(b, r.Replica)
	b = appendString(b, r.Team)
	b = appendCost(b, usageCost{r.CachedTokens, r.CacheWriteTokens, r.ReasoningTokens, r.UsageEstimated, r.HasCost, r.CostUSD})
	b = appendString(b, r.TraceID)
	b = appendString(b, r.Cache)
	b = appendBool(b, r.HasSaved)
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(r.SavedUSD))
}

// usageCost is what version 2 frames add to both kinds of record.
type usageCost struct {
	cached, write, reasoning int64
	estimated, hasCost       bool
	usd                      float64
}

func appendCost(b []byte, u usageCost) []byte {
	b = binary.AppendVarint(b, u.cached)
	b = binary.AppendVarint(b, u.write)
	b = binary.AppendVarint(b, u.reasoning)
	b = appendBool(b, u.estimated)
	b = appendBool(b, u.hasCost)
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(u.usd))
}

func (d *decoder) cost() (u usageCost) {
	u.cached, u.write, u.reasoning = d.varint(), d.varint(), d.varint()
	u.estimated, u.hasCost = d.bool(), d.bool()
	u.usd = d.float64()
	if d.bad {
		return usageCost{}
	}
	return u
}

// float64 reads the 8 little-endian bytes of a float64's bits.
func (d *decoder) float64() float64 {
	if d.bad || len(d.b) < 8 {
		d.bad = true
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	return v
}

func appendCandidate(b []byte, c *Candidate) []byte {
	b = append(b, c.RequestID[:]...)
	b = binary.AppendVarint(b, int64(c.Index))
	b = binary.AppendVarint(b, int64(c.RetryIndex))
	b = appendString(b, c.Provider)
	b = appendString(b, c.Endpoint)
	b = appendString(b, c.KeyID)
	b = appendString(b, c.Model)
	b = appendString(b, c.Status)
	b = appendString(b, c.SkipReason)
	b = binary.AppendVarint(b, int64(c.StatusCode))
	b = appendString(b, c.ErrorType)
	b = appendString(b, c.ErrorMessage)
	b = binary.AppendVarint(b, int64(c.Latency))
	b = binary.AppendVarint(b, int64(c.FirstByte))
	b = appendTime(b, c.StartedAt)
	b = appendTime(b, c.FinishedAt)
	b = appendTime(b, c.CreatedAt)
	// Version 2: the resume flag is written, then the usage and cost.
	b = appendBool(b, c.Resumed)
	b = binary.AppendVarint(b, int64(c.ResumedFrom))
	b = appendBool(b, c.HasUsage)
	b = binary.AppendVarint(b, c.PromptTokens)
	b = binary.AppendVarint(b, c.CompletionTokens)
	return appendCost(b, usageCost{c.CachedTokens, c.CacheWriteTokens, c.ReasoningTokens, c.UsageEstimated, c.HasCost, c.CostUSD})
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendTime stores a flag (zero or not) and Unix nanoseconds; the zero time
// means NULL and must survive the round trip as zero.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	return binary.AppendVarint(b, t.UnixNano())
}

// decodePayload parses a frame's payload (CRC already checked) into rec.
func decodePayload(p []byte, rec *record) error {
	d := decoder{b: p}
	version := d.byte()
	if version < 1 || version > spoolVersion {
		return errBadPayload
	}
	*rec = record{kind: recordKind(d.byte())}
	switch rec.kind {
	case kindRequest:
		r := &rec.req
		d.uuid(&r.ID)
		r.ClientRequestID = d.string()
		r.CreatedAt = d.time()
		r.Model = d.string()
		r.Stream = d.bool()
		r.Client = d.string()
		r.Priority = d.string()
		r.Status = d.string()
		r.StatusCode = int(d.varint())
		r.ErrorType = d.string()
		r.Latency = time.Duration(d.varint())
		r.FirstByte = time.Duration(d.varint())
		r.CandidateCount = int(d.varint())
		r.HasUsage = d.bool()
		r.PromptTokens = d.varint()
		r.CompletionTokens = d.varint()
		r.TotalTokens = d.varint()
		r.FinishedAt = d.time()
		if len(d.b) > 0 { // frames spooled before routes existed end here
			r.Route = d.string()
		}
		if len(d.b) > 0 { // frames spooled before replicas existed end here
			r.Replica = d.string()
		}
		if version >= 2 {
			r.Team = d.string()
			u := d.cost()
			r.CachedTokens, r.CacheWriteTokens, r.ReasoningTokens = u.cached, u.write, u.reasoning
			r.UsageEstimated, r.HasCost, r.CostUSD = u.estimated, u.hasCost, u.usd
		}
		if version >= 3 {
			r.TraceID = d.string()
		}
		if version >= 4 {
			r.Cache = d.string()
			r.HasSaved, r.SavedUSD = d.bool(), d.float64()
		}
	case kindCandidate:
		c := &rec.cand
		d.uuid(&c.RequestID)
		c.Index = int(d.varint())
		c.RetryIndex = int(d.varint())
		c.Provider = d.string()
		c.Endpoint = d.string()
		c.KeyID = d.string()
		c.Model = d.string()
		c.Status = d.string()
		c.SkipReason = d.string()
		c.StatusCode = int(d.varint())
		c.ErrorType = d.string()
		c.ErrorMessage = d.string()
		c.Latency = time.Duration(d.varint())
		c.FirstByte = time.Duration(d.varint())
		c.StartedAt = d.time()
		c.FinishedAt = d.time()
		c.CreatedAt = d.time()
		switch {
		case version >= 2:
			c.Resumed, c.ResumedFrom = d.bool(), int(d.varint())
			c.HasUsage, c.PromptTokens, c.CompletionTokens = d.bool(), d.varint(), d.varint()
			u := d.cost()
			c.CachedTokens, c.CacheWriteTokens, c.ReasoningTokens = u.cached, u.write, u.reasoning
			c.UsageEstimated, c.HasCost, c.CostUSD = u.estimated, u.hasCost, u.usd
		case len(d.b) > 0: // a version 1 resuming attempt's
			c.Resumed, c.ResumedFrom = true, int(d.varint())
		}
	default:
		return errBadPayload
	}
	if d.bad || len(d.b) != 0 {
		return errBadPayload
	}
	return nil
}

// decoder reads fields sequentially; the first malformed read sets bad and makes
// every later read return a zero value, so callers check once at the end.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) byte() byte {
	if d.bad || len(d.b) < 1 {
		d.bad = true
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) bool() bool { return d.byte() == 1 }

func (d *decoder) uuid(u *uuid.UUID) {
	if d.bad || len(d.b) < len(u) {
		d.bad = true
		return
	}
	copy(u[:], d.b)
	d.b = d.b[len(u):]
}

func (d *decoder) varint() int64 {
	if d.bad {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	if d.bad {
		return ""
	}
	n, k := binary.Uvarint(d.b)
	if k <= 0 || n > uint64(len(d.b)-k) {
		d.bad = true
		return ""
	}
	s := string(d.b[k : k+int(n)])
	d.b = d.b[k+int(n):]
	return s
}

func (d *decoder) time() time.Time {
	if d.byte() == 0 {
		return time.Time{}
	}
	return time.Unix(0, d.varint()).UTC()
}
