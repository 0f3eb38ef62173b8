package model

import "strings"

// price is dollars per million tokens.
type price struct{ in, out, cacheRead, cacheWrite float64 }

// prices are list prices by model name prefix, longest prefix first; a
// model not here (a local one) costs nothing known.
var prices = []struct {
	prefix string
	p      price
}{
	{"claude-opus-4", price{15, 75, 1.5, 18.75}},
	{"claude-sonnet-4", price{3, 15, 0.3, 3.75}},
	{"claude-haiku-4", price{1, 5, 0.1, 1.25}},
	{"gpt-5-mini", price{0.25, 2, 0.025, 0}},
	{"gpt-5", price{1.25, 10, 0.125, 0}},
	{"gpt-4.1", price{2, 8, 0.5, 0}},
	{"gpt-4o", price{2.5, 10, 1.25, 0}},
}

// Cost is what u cost on model in dollars, 0 when the price is unknown.
// InputTokens count uncached input only.
func Cost(model string, u Usage) float64 {
	for _, e := range prices {
		if strings.HasPrefix(model, e.prefix) {
			p := e.p
			return (float64(u.InputTokens)*p.in + float64(u.OutputTokens)*p.out +
				float64(u.CacheReadTokens)*p.cacheRead + float64(u.CacheWriteTokens)*p.cacheWrite) / 1e6
		}
	}
	return 0
}
