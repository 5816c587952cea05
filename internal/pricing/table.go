package pricing

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Table is a price table: vendor → model → Price.
type Table struct {
	prices map[string]map[string]Price
}

// Lookup finds model under vendor: the exact name first, then without a
// trailing date suffix.
func (t *Table) Lookup(vendor, model string) (Price, bool) {
	if t == nil {
		return Price{}, false
	}
	m := t.prices[vendor]
	if p, ok := m[model]; ok {
		return p, true
	}
	if base := BaseModel(model); base != model {
		if p, ok := m[base]; ok {
			return p, true
		}
	}
	if id, ok := strings.CutPrefix(model, regionPrefix(model)); ok && id != model {
		// A Bedrock cross-region inference profile ("us.anthropic.claude-…")
		// is billed as the model it routes to.
		return t.Lookup(vendor, id)
	}
	return Price{}, false
}

// regionPrefix is the geography of a Bedrock cross-region inference
// profile id ("us.", "eu.", "apac.", "global."…), or "" for any other model.
func regionPrefix(model string) string {
	geo, rest, ok := strings.Cut(model, ".")
	if !ok || !strings.Contains(rest, ".") { // the vendor's dot must follow
		return ""
	}
	switch geo {
	case "us", "eu", "apac", "global", "jp", "au", "ca", "us-gov":
		return geo + "."
	}
	return ""
}

// Vendors lists the table's vendors, sorted.
func (t *Table) Vendors() []string {
	out := make([]string, 0, len(t.prices))
	for v := range t.prices {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// Len is the number of priced models.
func (t *Table) Len() int {
	n := 0
	for _, m := range t.prices {
		n += len(m)
	}
	return n
}

// dateSuffix is a trailing release date: -2024-08-06, -20241022, @20241022.
var dateSuffix = regexp.MustCompile(`(-\d{4}-\d{2}-\d{2}|-\d{8}|@\d{8})$`)

// BaseModel is model without a trailing date suffix (gpt-4o-2024-08-06 →
// gpt-4o); a Bedrock version like -v1:0 is not a date and stays.
func BaseModel(model string) string { return dateSuffix.ReplaceAllString(model, "") }

// FieldError names what is wrong in a price file, by path
// (openai.gpt-4o.input).
type FieldError struct{ Path, Message string }

func (e *FieldError) Error() string { return e.Path + ": " + e.Message }

// ErrTooLarge refuses a price file over MaxFileBytes.
var ErrTooLarge = errors.New("price file larger than 4 MiB")

// MaxFileBytes bounds a price file: a swapped-in log must not be read whole.
const MaxFileBytes = 4 << 20

// Load reads a price file (GATEWAY_PRICES_FILE).
func Load(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, ErrTooLarge
	}
	return Parse(b)
}

// entry is one model's line of a price file.
type entry struct {
	Input       *float64 `yaml:"input"`
	Output      *float64 `yaml:"output"`
	CachedInput *float64 `yaml:"cached_input"`
	CacheWrite  *float64 `yaml:"cache_write"`
	Request     *float64 `yaml:"request"`
	AsOf        string   `yaml:"as_of"`
	Source      string   `yaml:"source"`
}

var entryFields = map[string]bool{"input": true, "output": true, "cached_input": true, "cache_write": true,
	"request": true, "as_of": true, "source": true}

// Parse reads a price table: an optional top-level as_of (the default date
// of its entries), then vendor → model → {input, output, cached_input,
// cache_write, request, as_of, source}. input and output are required;
// cached_input and cache_write default to input, request to 0.
func Parse(data []byte) (*Table, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	if len(doc.Content) == 0 {
		return nil, &FieldError{Path: "(file)", Message: "is empty"}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &FieldError{Path: "(file)", Message: "must be a mapping of vendor to models"}
	}
	t := &Table{prices: map[string]map[string]Price{}}
	asOf := ""
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k := root.Content[i].Value; k == "as_of" {
			asOf = root.Content[i+1].Value
		}
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		vendor, models := root.Content[i].Value, root.Content[i+1]
		if vendor == "as_of" {
			continue
		}
		if models.Kind != yaml.MappingNode || len(models.Content) == 0 {
			return nil, &FieldError{Path: vendor, Message: "must be a non-empty mapping of model to prices"}
		}
		m := map[string]Price{}
		for j := 0; j+1 < len(models.Content); j += 2 {
			model, n := models.Content[j].Value, models.Content[j+1]
			path := vendor + "." + model
			p, err := parseEntry(path, n, asOf)
			if err != nil {
				return nil, err
			}
			m[model] = p
		}
		t.prices[vendor] = m
	}
	if len(t.prices) == 0 {
		return nil, &FieldError{Path: "(file)", Message: "names no vendor"}
	}
	return t, nil
}

func parseEntry(path string, n *yaml.Node, asOf string) (Price, error) {
	if n.Kind != yaml.MappingNode {
		return Price{}, &FieldError{Path: path, Message: "must be a mapping like {input: 2.5, output: 10}"}
	}
	for k := 0; k+1 < len(n.Content); k += 2 {
		if f := n.Content[k].Value; !entryFields[f] {
			return Price{}, &FieldError{Path: path + "." + f, Message: "is not a price field (input, output, cached_input, cache_write, request, as_of, source)"}
		}
	}
	var e entry
	if err := n.Decode(&e); err != nil {
		return Price{}, &FieldError{Path: path, Message: "prices must be numbers: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	fields := []struct {
		name  string
		v     *float64
		limit float64
	}{{"input", e.Input, MaxPrice}, {"output", e.Output, MaxPrice}, {"cached_input", e.CachedInput, MaxPrice},
		{"cache_write", e.CacheWrite, MaxPrice}, {"request", e.Request, MaxRequest}}
	for _, f := range fields {
		if f.v == nil {
			if f.name == "input" || f.name == "output" {
				return Price{}, &FieldError{Path: path + "." + f.name, Message: "is required"}
			}
			continue
		}
		if math.IsNaN(*f.v) || *f.v < 0 || *f.v > f.limit {
			return Price{}, &FieldError{Path: path + "." + f.name, Message: fmt.Sprintf("must be a number from 0 to %g", f.limit)}
		}
	}
	p := Price{Input: *e.Input, Output: *e.Output, CachedInput: *e.Input, CacheWrite: *e.Input, AsOf: e.AsOf, Source: e.Source}
	if e.CachedInput != nil {
		p.CachedInput = *e.CachedInput
	}
	if e.CacheWrite != nil {
		p.CacheWrite = *e.CacheWrite
	}
	if e.Request != nil {
		p.Request = *e.Request
	}
	if p.AsOf == "" {
		p.AsOf = asOf
	}
	return p, nil
}

//go:embed prices.yaml
var defaultPrices []byte

var defaultTable = sync.OnceValue(func() *Table {
	t, err := Parse(defaultPrices)
	if err != nil {
		panic("pricing: the built-in table does not parse: " + err.Error())
	}
	return t
})

// Default is the built-in table (prices.yaml), parsed once.
func Default() *Table { return defaultTable() }
