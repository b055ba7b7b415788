package parse

import (
	"strings"
	"unicode"
)

// ClassifySMIError says how nvidia-smi failed, from what it printed and its exit status (nil
// when unknown). It returns nil when the text names no known failure and the exit status is
// 0 or unknown: the query worked. Exit status 124 or 137 is the probe's timeout, whatever was
// printed; 127 with "not found" is a missing binary.
func ClassifySMIError(text string, exitCode *int) *SMIFailure {
	f := &SMIFailure{Message: smiMessage(text), ExitCode: exitCode}
	rc := -1
	if exitCode != nil {
		rc = *exitCode
	}
	norm := normalizeSMIText(text)
	switch {
	case rc == 124 || rc == 137:
		f.Kind = SMITimeout
	case rc == 127 && (strings.Contains(norm, "not found") || strings.Contains(norm, "no such file")):
		f.Kind = SMIMissing
	case strings.Contains(norm, "gpu is lost"):
		f.Kind = SMIGPULost
		f.BusID = handleBusID(text)
	case strings.Contains(norm, "driver/library version mismatch"):
		f.Kind = SMIVersionMismatch
		if i := strings.Index(text, "NVML library version:"); i >= 0 && !strings.Contains(f.Message, "NVML library version:") {
			v, _, _ := strings.Cut(text[i:], "\n")
			f.Message += "\n" + strings.TrimSpace(v)
		}
	case strings.Contains(norm, "couldn't communicate with the nvidia driver"),
		strings.Contains(norm, "could not communicate with the nvidia driver"),
		strings.Contains(norm, "couldnt communicate with the nvidia driver"):
		f.Kind = SMINoDriver
	case strings.Contains(norm, "unable to determine the device handle for gpu"):
		f.Kind = SMIDeviceHandle
		f.BusID = handleBusID(text)
	case strings.Contains(norm, "no devices were found"):
		f.Kind = SMINoDevices
	case exitCode != nil && rc != 0:
		f.Kind = SMIOther
	default:
		return nil
	}
	return f
}

// normalizeSMIText lower-cases text, makes typographic apostrophes plain and folds runs of
// white space into one space, so that wrapped or retyped messages still match.
func normalizeSMIText(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = true
			continue
		case r == '\u2019' || r == '\u2018' || r == '`':
			r = '\''
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// handleBusID finds the bus id in "Unable to determine the device handle for GPU
// 0000:09:00.0: Unknown Error" (the bus id holds colons: it ends at ": ").
func handleBusID(text string) string {
	const key = "for GPU "
	i := strings.Index(text, key)
	if i < 0 {
		return ""
	}
	rest := text[i+len(key):]
	if j := strings.Index(rest, ": "); j >= 0 {
		rest = rest[:j]
	} else {
		rest, _, _ = strings.Cut(rest, "\n")
		rest = strings.TrimSuffix(strings.TrimSpace(rest), ":")
	}
	rest = strings.TrimSpace(rest)
	if rest == "" || len(rest) > 64 || strings.ContainsAny(rest, " \t\r\n") {
		return ""
	}
	return rest
}

// smiMessage keeps nvidia-smi's first non-empty lines, bounded.
func smiMessage(text string) string {
	const maxLines, maxBytes = 4, 1024
	var keep []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			keep = append(keep, l)
			if len(keep) == maxLines {
				break
			}
		}
	}
	return clip(strings.Join(keep, "\n"), maxBytes)
}
