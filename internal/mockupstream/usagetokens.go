package mockupstream

import "strconv"

// Cache and reasoning counts in the usage the mock reports, as each vendor reports
// them, so that a gateway's cost of cached and reasoning tokens can be tested against
// the real mock. The mock's prompt is promptTokens(body) uncached tokens; cache reads
// and writes come on top of it, and reasoning on top of the answer's output:
//
//	OpenAI chat      prompt_tokens = uncached + cached + cache write, with
//	                 prompt_tokens_details.cached_tokens = cached; completion_tokens =
//	                 output + reasoning, with completion_tokens_details.reasoning_tokens
//	Responses        input_tokens and input_tokens_details.cached_tokens, output_tokens
//	                 and output_tokens_details.reasoning_tokens, counted the same way
//	Anthropic        input_tokens = uncached only; cache_read_input_tokens = cached and
//	                 cache_creation_input_tokens = cache write beside it (in
//	                 message_start when streaming); output_tokens = output + reasoning
//	                 (Anthropic bills thinking as output and has no field for it)
//
// OpenAI reports no cache writes: they are billed as plain input there, so they are
// counted in prompt_tokens and nowhere else. Embeddings have neither. With all three
// counts zero (the default) the usage objects are the mock's usual ones, without the
// details objects on chat and the cache fields on Anthropic.
const (
	HeaderCachedTokens     = "X-Mock-Cached-Tokens"
	HeaderCacheWriteTokens = "X-Mock-Cache-Write-Tokens"
	HeaderReasoningTokens  = "X-Mock-Reasoning-Tokens"
)

// usageTokens are an answer's cache and reasoning counts (Behavior.CachedTokens,
// CacheWriteTokens, ReasoningTokens).
type usageTokens struct{ cached, cacheWrite, reasoning int }

func tokensOf(b *Behavior) usageTokens {
	return usageTokens{cached: b.CachedTokens, cacheWrite: b.CacheWriteTokens, reasoning: b.ReasoningTokens}
}

func (t usageTokens) zero() bool { return t == usageTokens{} }

// openAIPrompt is the whole prompt as OpenAI counts it, cache reads and writes in it.
func (c *completion) openAIPrompt() int { return c.promptN + c.extra.cached + c.extra.cacheWrite }

// openAIOutput is the output with the reasoning in it.
func (c *completion) openAIOutput() int { return c.chunks + c.extra.reasoning }

// appendAnthropicCache appends Anthropic's cache counts after input_tokens, when
// there are any.
func (c *completion) appendAnthropicCache(dst []byte) []byte {
	if c.extra.cached == 0 && c.extra.cacheWrite == 0 {
		return dst
	}
	dst = append(dst, `,"cache_creation_input_tokens":`...)
	dst = strconv.AppendInt(dst, int64(c.extra.cacheWrite), 10)
	dst = append(dst, `,"cache_read_input_tokens":`...)
	return strconv.AppendInt(dst, int64(c.extra.cached), 10)
}
