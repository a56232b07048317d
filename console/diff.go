package console

import "strings"

// diffLine is one line of a line diff: Op is ' ' (kept), '-' (removed) or
// '+' (added). The template escapes Text like any other untrusted text.
type diffLine struct {
	Op   string
	Text string
}

// maxDiffCells bounds the work of the longest-common-subsequence table;
// larger inputs are shown as every old line removed and every new line
// added.
const maxDiffCells = 4 << 20

// lineDiff returns the line diff turning a into b, by longest common
// subsequence of lines.
func lineDiff(a, b string) []diffLine {
	x, y := splitLines(a), splitLines(b)
	// Common prefix and suffix first: most edits touch a few lines.
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	var out []diffLine
	for _, l := range x[:pre] {
		out = append(out, diffLine{" ", l})
	}
	out = append(out, lcsDiff(x[pre:len(x)-suf], y[pre:len(y)-suf])...)
	for _, l := range x[len(x)-suf:] {
		out = append(out, diffLine{" ", l})
	}
	return out
}

func lcsDiff(x, y []string) []diffLine {
	var out []diffLine
	if (len(x)+1)*(len(y)+1) > maxDiffCells {
		for _, l := range x {
			out = append(out, diffLine{"-", l})
		}
		for _, l := range y {
			out = append(out, diffLine{"+", l})
		}
		return out
	}
	// t[i][j] is the LCS length of x[i:] and y[j:].
	t := make([][]int32, len(x)+1)
	for i := range t {
		t[i] = make([]int32, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				t[i][j] = t[i+1][j+1] + 1
			} else {
				t[i][j] = max(t[i+1][j], t[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch {
		case x[i] == y[j]:
			out = append(out, diffLine{" ", x[i]})
			i++
			j++
		case t[i+1][j] >= t[i][j+1]:
			out = append(out, diffLine{"-", x[i]})
			i++
		default:
			out = append(out, diffLine{"+", y[j]})
			j++
		}
	}
	for ; i < len(x); i++ {
		out = append(out, diffLine{"-", x[i]})
	}
	for ; j < len(y); j++ {
		out = append(out, diffLine{"+", y[j]})
	}
	return out
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(strings.ReplaceAll(s, "\r\n", "\n"), "\n"), "\n")
}
