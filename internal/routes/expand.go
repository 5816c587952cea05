package routes

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/llmgw/gateway/internal/secret"
)

// varRef matches ${VAR} and ${VAR:-default}; as in the shell, the default
// applies when VAR is unset or empty.
var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

// expandString replaces ${VAR} and ${VAR:-default}. A missing variable
// expands to ""; the returned expansion says which variables were used and
// in what state, for the caller's error message.
func expandString(s string, lookup func(string) (string, bool)) (string, expansion) {
	var x expansion
	matches := varRef.FindAllStringSubmatchIndex(s, -1)
	if matches == nil {
		return s, x
	}
	var b strings.Builder
	last := 0
	for _, m := range matches {
		b.WriteString(s[last:m[0]])
		last = m[1]
		name := s[m[2]:m[3]]
		v, ok := lookup(name)
		u := varUse{Name: name, Set: ok, Empty: ok && v == ""}
		if m[4] >= 0 && v == "" {
			v = s[m[4]+2 : m[5]]
			u.Defaulted = true
		}
		if !slices.ContainsFunc(x.vars, func(o varUse) bool { return o.Name == name }) {
			x.vars = append(x.vars, u)
		}
		b.WriteString(v)
	}
	b.WriteString(s[last:])
	return b.String(), x
}

// expand resolves ${VAR} in values only (never in keys or structure), after
// YAML parsing, so an env value cannot inject YAML. It returns, by YAML
// path, where base_url and each key came from.
func (r *Routes) expand(lookup func(string) (string, bool)) map[string]expansion {
	from := map[string]expansion{}
	for i := range r.Providers {
		p := &r.Providers[i]
		path := fmt.Sprintf("providers[%d]", i)
		p.BaseURL, from[path+".base_url"] = expandString(p.BaseURL, lookup)
		for k, key := range p.APIKeys {
			var v string
			v, from[fmt.Sprintf("%s.api_keys[%d]", path, k)] = expandString(key.Reveal(), lookup)
			p.APIKeys[k] = secret.New(v)
		}
		for k, v := range p.Headers {
			p.Headers[k], _ = expandString(v, lookup)
		}
		for k, v := range p.Query {
			p.Query[k], _ = expandString(v, lookup)
		}
		// Where a deployment keeps its Google project and key file:
		// ${GOOGLE_CLOUD_PROJECT}, ${GOOGLE_APPLICATION_CREDENTIALS}.
		p.CredentialsFile, from[path+".credentials_file"] = expandString(p.CredentialsFile, lookup)
		p.Vertex.Project, from[path+".vertex.project"] = expandString(p.Vertex.Project, lookup)
		p.Vertex.Location, from[path+".vertex.location"] = expandString(p.Vertex.Location, lookup)
		// ${AWS_REGION}, ${AWS_ACCESS_KEY_ID} and the like.
		p.Bedrock.Region, from[path+".bedrock.region"] = expandString(p.Bedrock.Region, lookup)
		for _, f := range []struct {
			name string
			s    *secret.String
		}{{"access_key_id", &p.AWS.AccessKeyID}, {"secret_access_key", &p.AWS.SecretAccessKey}, {"session_token", &p.AWS.SessionToken}} {
			var v string
			v, from[path+".aws."+f.name] = expandString(f.s.Reveal(), lookup)
			*f.s = secret.New(v)
		}
	}
	return from
}

// varUse is one ${VAR} reference met while expanding a value.
type varUse struct {
	Name      string
	Set       bool // the variable exists in the environment
	Empty     bool // it exists but is empty
	Defaulted bool // ${VAR:-default} fell back to its default
}

// expansion records where an expanded value came from, so an error about
// the value can name the variable that made it so.
type expansion struct {
	vars []varUse
}

// origin renders " (it comes from ${X}, which is not set)" for a value that
// had references, or "" for a literal one.
func (x expansion) origin() string {
	if len(x.vars) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(" (it comes from ")
	for i, u := range x.vars {
		ref := "${" + u.Name + "}"
		state := ""
		switch {
		case !u.Set:
			state = ", which is not set"
		case u.Empty:
			state = ", which is empty"
		}
		if u.Defaulted {
			ref = "the default of " + ref
		}
		if i > 0 {
			b.WriteString(" and ")
		}
		b.WriteString(ref + state)
		if state != "" && i < len(x.vars)-1 {
			b.WriteString(",") // "${A}, which is not set, and ${B}"
		}
	}
	b.WriteString(")")
	return b.String()
}
