package routes

import (
	"fmt"
	"strconv"
	"strings"
)

// quoteShort quotes a value that is safe to show (a field name, a number,
// a duration), cut so a stray paste cannot flood the message.
func quoteShort(s string) string { return quoteCut(s, 64) }

func quoteCut(s string, limit int) string {
	if r := []rune(s); len(r) > limit {
		s = string(r[:limit]) + "..."
	}
	return strconv.Quote(s)
}

// suggest returns ` (did you mean "x"?)` when name is a near miss of one of
// the known names: the same after dropping case, '-' and '_', within a
// small edit distance, or contained in exactly one of them.
func suggest(name string, known []string) string {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	}
	n := norm(name)
	if n == "" {
		return ""
	}
	best, bestD := "", 3
	var containing []string
	for _, k := range known {
		d := editDistance(n, norm(k))
		if d < bestD {
			best, bestD = k, d
		}
		if len(n) >= 3 && strings.Contains(norm(k), n) {
			containing = append(containing, k)
		}
	}
	if best == "" && len(containing) == 1 {
		best = containing[0]
	}
	if best == "" || (bestD == 2 && len(n) <= 4 && len(containing) != 1) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
