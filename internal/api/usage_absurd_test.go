package api

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmgw/gateway/internal/report"
)

// last is the last candidate record.
func (o *outcomes) last() report.Candidate {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.rows[len(o.rows)-1]
}

// TestAbsurdUsageIsNotCounted protects the ledger and the token windows
// from usage no provider can have sent truthfully: negative, past the
// ceiling, fractional or past int64. The answer still reaches the client
// as it was sent, the request row has no tokens (NULL, not a wrong
// number) and carries upstream_protocol_error, as does the candidate row,
// which stays a success; a sane usage is recorded as before.
func TestAbsurdUsageIsNotCounted(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	up := &bodyUpstream{}
	o := newOutcomes()
	url := startGateway(t, up, o)
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	for _, tc := range []struct {
		name, usage string
		ok          bool
		total       int64
	}{
		{"sane", `{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}`, true, 7},
		{"negative", `{"prompt_tokens":-5,"completion_tokens":2,"total_tokens":-3}`, false, 0},
		{"int64 max", `{"prompt_tokens":1,"completion_tokens":1,"total_tokens":9223372036854775807}`, false, 0},
		{"above the ceiling", `{"prompt_tokens":1000000001,"completion_tokens":0,"total_tokens":1000000001}`, false, 0},
		{"float", `{"prompt_tokens":1.5,"completion_tokens":2,"total_tokens":3.5}`, false, 0},
		{"overflow", `{"prompt_tokens":1,"completion_tokens":1,"total_tokens":99999999999999999999999}`, false, 0},
	} {
		for _, stream := range []bool{false, true} {
			name := tc.name
			var body string
			if stream {
				name += " stream"
				body = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n" +
					"data: {\"choices\":[],\"usage\":" + tc.usage + "}\n\ndata: [DONE]\n\n"
			} else {
				body = `{"id":"x","choices":[{"message":{"content":"hi"}}],"usage":` + tc.usage + `}`
			}
			b := []byte(body)
			up.body.Store(&b)
			up.stream.Store(stream)
			before := o.panicCount()
			reqBody := `{"model":"m","messages":[],"stream":` + map[bool]string{false: "false", true: "true"}[stream] +
				`,"stream_options":{"include_usage":true}}`
			resp, err := client.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(reqBody))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(got) != body {
				t.Errorf("%s: %d %q, want 200 and the provider's bytes %q", name, resp.StatusCode, got, body)
			}
			rec := o.wait(t, resp.Header.Get("X-Request-Id"), before)
			row := o.last()
			if tc.ok {
				if !rec.HasUsage || rec.TotalTokens != tc.total || rec.ErrorType != "" || row.ErrorType != "" {
					t.Errorf("%s: request %+v, candidate %+v; want %d tokens and no error", name, rec, row, tc.total)
				}
				continue
			}
			if rec.HasUsage || rec.Status != report.RequestSuccess || rec.ErrorType != report.ErrorTypeUpstreamProtocol {
				t.Errorf("%s: request row %+v, want a success without tokens, error_type upstream_protocol_error", name, rec)
			}
			if row.Status != report.CandidateSuccess || row.ErrorType != report.ErrorTypeUpstreamProtocol ||
				!strings.Contains(row.ErrorMessage, "usage") {
				t.Errorf("%s: candidate row %+v, want success with the protocol error's detail", name, row)
			}
		}
	}
}
