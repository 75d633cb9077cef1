package blobtier

import "strings"

// RedactText returns s with every URL inside it redacted (Redact): for an
// error message or a log line that may quote a request URL, such as the
// SDK's `Put "http://user:PASS@host/key?token=…": …`. A URL is a run of
// characters without space or quote that holds "://" after a scheme.
func RedactText(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	for s != "" {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			break
		}
		start := i
		for start > 0 && isSchemeByte(s[start-1]) {
			start--
		}
		end := i + 3
		for end < len(s) && !isURLStop(s[end]) {
			end++
		}
		b.WriteString(s[:start])
		if start == i {
			b.WriteString(s[i:end]) // no scheme: not a URL
		} else {
			b.WriteString(Redact(s[start:end]))
		}
		s = s[end:]
	}
	return b.String()
}

func isSchemeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

func isURLStop(c byte) bool {
	return c == ' ' || c == '"' || c == '\'' || c == '\t' || c == '\n' || c == '<' || c == '>' || c == '`'
}
