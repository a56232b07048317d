package console

import "strings"

// stackLine is one line of a Go stack trace as the task page shows it.
type stackLine struct {
	Text string
	// Handler marks the lines of a frame of the handler's code: not of
	// rdq, the standard library's runtime, or a goroutine header.
	Handler bool
}

// stackView is a stack trace split into lines, with its first handler
// frame (function and file) named for the summary.
type stackView struct {
	Lines        []stackLine
	FirstHandler string
}

// rdqModule is the import path prefix of rdq's own frames.
const rdqModule = "github.com/srjn45/rdq"

// viewStack marks the handler's frames of a Go stack trace: a frame is a
// function line followed by its tab-indented file line; frames of rdq
// (outside its examples) and of the runtime are not the handler's. Text
// that is not a Go stack is returned line by line, unmarked.
func viewStack(stack string) stackView {
	var v stackView
	lines := strings.Split(strings.TrimRight(stack, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		fn := lines[i]
		if strings.HasPrefix(fn, "\t") || i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "\t") {
			v.Lines = append(v.Lines, stackLine{Text: fn})
			continue
		}
		h := handlerFrame(fn)
		v.Lines = append(v.Lines, stackLine{Text: fn, Handler: h}, stackLine{Text: lines[i+1], Handler: h})
		if h && v.FirstHandler == "" {
			v.FirstHandler = strings.TrimSpace(fn) + " at " + strings.TrimSpace(lines[i+1])
		}
		i++
	}
	return v
}

// handlerFrame reports whether a frame's function line is of the
// handler's code.
func handlerFrame(fn string) bool {
	switch {
	case strings.HasPrefix(fn, "goroutine "), strings.HasPrefix(fn, "created by "),
		strings.HasPrefix(fn, "runtime."), strings.HasPrefix(fn, "runtime/"), strings.HasPrefix(fn, "panic("):
		return false
	case strings.HasPrefix(fn, rdqModule+"/examples"):
		return true
	case strings.HasPrefix(fn, rdqModule+".") || strings.HasPrefix(fn, rdqModule+"/"):
		return false
	}
	return true
}
