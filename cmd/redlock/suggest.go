package main

import "strings"

// closest returns the one of names that typed most likely misspells, or ""
// when none is close: a transposition, a letter missing, extra or wrong
// (two for names of five letters or more), or a unique prefix of at least
// three letters. Leading dashes are ignored on both sides.
func closest(typed string, names []string) string {
	typed = strings.TrimLeft(typed, "-")
	best, bestDist, prefixed := "", 0, 0
	for _, n := range names {
		bare := strings.TrimLeft(n, "-")
		if bare == typed {
			continue
		}
		if len(typed) >= 3 && strings.HasPrefix(bare, typed) {
			prefixed++
			if prefixed == 1 {
				best, bestDist = n, 0
			}
			continue
		}
		limit := 1
		if len(bare) >= 5 {
			limit = 2
		}
		if d := editDistance(typed, bare); d <= limit && prefixed == 0 && (best == "" || d < bestDist) {
			best, bestDist = n, d
		}
	}
	if prefixed > 1 {
		return "" // ambiguous
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and transpositions of two adjacent
// letters, each 1.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
