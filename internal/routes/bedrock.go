package routes

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/llmgw/gateway/internal/secret"
	"github.com/llmgw/gateway/internal/upstream"
)

// BedrockConfig is where a format bedrock provider's models are: the AWS
// region of bedrock-runtime.{region}.amazonaws.com, which is also the
// region requests are signed for.
type BedrockConfig struct {
	Region string `yaml:"region"`
}

// AWSConfig is a format bedrock provider's static credentials, each value
// with ${VAR} expansion. All three are secrets: never shown, redacted
// wherever provider text is kept. Without access_key_id the standard AWS
// chain (environment, shared files, web identity, container and instance
// roles) provides the credentials, at the first request.
type AWSConfig struct {
	AccessKeyID     secret.String `yaml:"access_key_id"`
	SecretAccessKey secret.String `yaml:"secret_access_key"`
	SessionToken    secret.String `yaml:"session_token"`
}

// awsRegion is a region as AWS spells them (us-east-1, eu-central-2,
// us-gov-west-1): it goes into the host name and the signature's scope.
var awsRegion = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

// bedrockBlock validates the bedrock and aws blocks of provider p and, for
// format bedrock without a base_url, fills in the region's runtime host.
func (v *validator) bedrockBlock(p *ProviderConfig, path string) error {
	if p.Format != upstream.FormatBedrock {
		for _, f := range []string{".bedrock", ".aws"} {
			if _, written := v.lines[path+f]; written {
				return v.fail(path+f, " applies only to format bedrock (this provider is %s)", p.Format)
			}
		}
		return nil
	}
	fp := path + ".bedrock.region"
	p.Bedrock.Region = strings.TrimSpace(p.Bedrock.Region)
	switch r := p.Bedrock.Region; {
	case r == "":
		return v.fail(fp, " is required for format bedrock, like us-east-1%s", v.exp[fp].origin())
	case !awsRegion.MatchString(r):
		return v.fail(fp, ": %s is not an AWS region (like us-east-1)%s", quoteShort(r), v.exp[fp].origin())
	}
	for i, h := range p.ForwardHeaders {
		if strings.HasPrefix(strings.ToLower(strings.TrimSpace(h)), "x-amz-") {
			// The signer's own headers (X-Amz-Date, X-Amz-Security-Token):
			// a client's value would be signed with the gateway's keys.
			return v.fail(fmt.Sprintf("%s.forward_headers[%d]", path, i), ": %s is never forwarded to format bedrock (SigV4's own headers)", quoteShort(h))
		}
	}
	a := &p.AWS
	id, key, tok := strings.TrimSpace(a.AccessKeyID.Reveal()), strings.TrimSpace(a.SecretAccessKey.Reveal()), strings.TrimSpace(a.SessionToken.Reveal())
	_, idWritten := v.lines[path+".aws.access_key_id"]
	switch {
	case id == "" && idWritten:
		// Written but empty: an unset ${VAR}, most likely. Falling back to
		// the chain in silence would sign with whatever the host has.
		kp := path + ".aws.access_key_id"
		return v.fail(kp, " is empty%s (leave the aws block out for the standard AWS credential chain)", v.exp[kp].origin())
	case id != "" && key == "":
		kp := path + ".aws.secret_access_key"
		return v.fail(kp, " is required with access_key_id%s", v.exp[kp].origin())
	case id == "" && (key != "" || tok != ""):
		return v.fail(path+".aws.access_key_id", " is required with secret_access_key and session_token")
	}
	a.AccessKeyID, a.SecretAccessKey, a.SessionToken = secret.New(id), secret.New(key), secret.New(tok)
	if _, written := v.lines[path+".base_url"]; !written {
		p.BaseURL = upstream.BedrockBase(p.Bedrock.Region)
	}
	return nil
}
