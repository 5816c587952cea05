package pricing

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
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
// (openai.gpt-4o.input) and, when known, line.
type FieldError struct {
	Path, Message string
	Line          int // 1-based; 0 when the error is about the whole file
}

func (e *FieldError) Error() string {
	if e.Line > 0 {
		return "line " + strconv.Itoa(e.Line) + ": " + e.Path + ": " + e.Message
	}
	return e.Path + ": " + e.Message
}

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

// priceFields are a price file entry's numbers, in the order errors name
// them, with their bounds.
type priceField struct {
	name  string
	limit float64
}

var priceFields = []priceField{{"input", MaxPrice}, {"output", MaxPrice}, {"cached_input", MaxPrice}, {"cache_write", MaxPrice}, {"request", MaxRequest}}

const knownFields = "input, output, cached_input, cache_write, request, as_of, source"

// Parse reads a price table: an optional top-level as_of (the default date
// of its entries), then vendor → model → {input, output, cached_input,
// cache_write, request, as_of, source}. input and output are required;
// cached_input and cache_write default to input, request to 0. An error is
// a *FieldError naming the vendor, model and field, and its line.
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
		return nil, &FieldError{Path: "(file)", Message: "must be a mapping of vendor to models", Line: root.Line}
	}
	t := &Table{prices: map[string]map[string]Price{}}
	asOf := ""
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k, v := root.Content[i], root.Content[i+1]; k.Value == "as_of" {
			if v.Kind != yaml.ScalarNode {
				return nil, &FieldError{Path: "as_of", Message: "must be a date such as 2026-01-31", Line: v.Line}
			}
			asOf = v.Value
		}
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, models := root.Content[i], root.Content[i+1]
		vendor := key.Value
		if vendor == "as_of" {
			continue
		}
		if _, dup := t.prices[vendor]; dup {
			return nil, &FieldError{Path: vendor, Message: "is listed twice", Line: key.Line}
		}
		if models.Kind != yaml.MappingNode || len(models.Content) == 0 {
			return nil, &FieldError{Path: vendor, Message: "must be a non-empty mapping of model to prices", Line: models.Line}
		}
		m := map[string]Price{}
		for j := 0; j+1 < len(models.Content); j += 2 {
			mk, n := models.Content[j], models.Content[j+1]
			model, path := mk.Value, vendor+"."+mk.Value
			if _, dup := m[model]; dup {
				return nil, &FieldError{Path: path, Message: "is listed twice", Line: mk.Line}
			}
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

// parseEntry reads one model's prices; each field is read on its own, so
// that a value of the wrong type is named by its own path.
func parseEntry(path string, n *yaml.Node, asOf string) (Price, error) {
	if n.Kind != yaml.MappingNode {
		return Price{}, &FieldError{Path: path, Message: "must be a mapping like {input: 2.5, output: 10}", Line: n.Line}
	}
	vals := map[string]float64{}
	p := Price{AsOf: asOf}
	seen := map[string]bool{}
	for k := 0; k+1 < len(n.Content); k += 2 {
		key, v := n.Content[k], n.Content[k+1]
		f, fp := key.Value, path+"."+key.Value
		if seen[f] {
			return Price{}, &FieldError{Path: fp, Message: "is written twice", Line: key.Line}
		}
		seen[f] = true
		switch f {
		case "as_of", "source":
			if v.Kind != yaml.ScalarNode {
				return Price{}, &FieldError{Path: fp, Message: "must be a string", Line: v.Line}
			}
			if f == "as_of" {
				p.AsOf = v.Value
			} else {
				p.Source = v.Value
			}
			continue
		}
		i := slices.IndexFunc(priceFields, func(pf priceField) bool { return pf.name == f })
		if i < 0 {
			return Price{}, &FieldError{Path: fp, Message: "is not a price field (" + knownFields + ")", Line: key.Line}
		}
		x, err := priceValue(v)
		if err != nil {
			return Price{}, &FieldError{Path: fp, Message: err.Error(), Line: v.Line}
		}
		if x == nil {
			continue // null: as if left out
		}
		if limit := priceFields[i].limit; !(*x >= 0 && *x <= limit) { // NaN fails both
			return Price{}, &FieldError{Path: fp, Line: v.Line,
				Message: fmt.Sprintf("must be a number from 0 to %g, got %s", limit, strconv.FormatFloat(*x, 'g', -1, 64))}
		}
		vals[f] = *x
	}
	for _, f := range []string{"input", "output"} {
		if _, ok := vals[f]; !ok {
			return Price{}, &FieldError{Path: path + "." + f, Message: "is required", Line: n.Line}
		}
	}
	p.Input, p.Output = vals["input"], vals["output"]
	p.CachedInput, p.CacheWrite = p.Input, p.Input
	if v, ok := vals["cached_input"]; ok {
		p.CachedInput = v
	}
	if v, ok := vals["cache_write"]; ok {
		p.CacheWrite = v
	}
	p.Request = vals["request"]
	return p, nil
}

// priceValue reads a price's node: a number, or null (nil). A quoted
// number, a word, a list or a mapping is an error saying which.
func priceValue(v *yaml.Node) (*float64, error) {
	switch v.Kind {
	case yaml.SequenceNode:
		return nil, errors.New("must be a number, not a list")
	case yaml.MappingNode:
		return nil, errors.New("must be a number, not a mapping")
	case yaml.ScalarNode:
	default:
		return nil, errors.New("must be a number")
	}
	switch v.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!int", "!!float":
		var x float64
		if err := v.Decode(&x); err != nil {
			return nil, fmt.Errorf("%q is not a number", v.Value)
		}
		return &x, nil
	}
	if _, err := strconv.ParseFloat(strings.TrimSpace(v.Value), 64); err == nil {
		return nil, fmt.Errorf("%q is not a number (write it without quotes)", v.Value)
	}
	return nil, fmt.Errorf("%q is not a number", v.Value)
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
