package admission

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParsePriority protects the header and config vocabulary.
func TestParsePriority(t *testing.T) {
	tests := []struct {
		in      string
		want    Priority
		wantErr bool
	}{
		{"", Interactive, false},
		{"   ", Interactive, false},
		{"interactive", Interactive, false},
		{"Interactive", Interactive, false},
		{" FOREGROUND ", Foreground, false},
		{"background", Background, false},
		{"\tMaintenance\n", Maintenance, false},
		{"urgent", Urgent, false},
		{"URGENT", Urgent, false},
		{"high", 0, true},
		{"interactive2", 0, true},
		{"1", 0, true},
	}
	for _, tt := range tests {
		got, err := ParsePriority(tt.in)
		if tt.wantErr {
			if err == nil {
				t.Errorf("ParsePriority(%q) = %v, want error", tt.in, got)
				continue
			}
			for _, name := range []string{"interactive", "foreground", "background", "maintenance"} {
				if !strings.Contains(err.Error(), name) {
					t.Errorf("ParsePriority(%q) error %q does not name %q", tt.in, err, name)
				}
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParsePriority(%q) = %v, %v; want %v, nil", tt.in, got, err, tt.want)
		}
	}
}

// TestPriorityNames protects String and the text round trip used by config.
func TestPriorityNames(t *testing.T) {
	for p, want := range map[Priority]string{
		Urgent: "urgent", Interactive: "interactive", Foreground: "foreground",
		Background: "background", Maintenance: "maintenance", Priority(9): "priority(9)",
	} {
		if got := p.String(); got != want {
			t.Errorf("Priority(%d).String() = %q, want %q", p, got, want)
		}
	}
	b, err := json.Marshal(struct{ P Priority }{Background})
	if err != nil || string(b) != `{"P":"background"}` {
		t.Fatalf("marshal = %s, %v", b, err)
	}
	var v struct{ P Priority }
	if err := json.Unmarshal([]byte(`{"P":" Foreground"}`), &v); err != nil || v.P != Foreground {
		t.Fatalf("unmarshal = %v, %v; want foreground", v.P, err)
	}
	if err := json.Unmarshal([]byte(`{"P":"bogus"}`), &v); err == nil {
		t.Fatal("unmarshal of bogus priority succeeded")
	}
	if _, err := Priority(9).MarshalText(); err == nil {
		t.Fatal("MarshalText of invalid priority succeeded")
	}
}
