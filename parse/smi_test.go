package parse

import (
	"strings"
	"testing"
)

func TestSMIErrorCorpus(t *testing.T) {
	files := corpusFiles(t, "smi-error_*.txt")
	tests := []struct {
		file string
		kind SMIFailureKind
		bus  string
	}{
		{"smi-error_couldnt-communicate_one-line.txt", SMINoDriver, ""},
		{"smi-error_device-handle_unknown-error.txt", SMIDeviceHandle, "0000:09:00.0"},
		{"smi-error_driver-mismatch_classic.txt", SMIVersionMismatch, ""},
		{"smi-error_gpu-is-lost.txt", SMIGPULost, "0000:02:00.0"},
	}
	if len(tests) != len(files) {
		t.Errorf("%d smi-error corpus files, %d tested", len(files), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, ok := files[tt.file]
			if !ok {
				t.Skip("not in corpus")
			}
			text := string(b)
			if first, rest, ok := strings.Cut(text, "\n"); ok && strings.HasPrefix(first, "$ ") {
				text = rest // the shell prompt of the person who pasted it
			}
			f := ClassifySMIError(text, intp(9))
			if f == nil {
				t.Fatal("got nil failure")
			}
			if f.Kind != tt.kind || f.BusID != tt.bus {
				t.Errorf("got kind %q bus %q, want %q %q", f.Kind, f.BusID, tt.kind, tt.bus)
			}
			if f.Message == "" || strings.HasPrefix(f.Message, "$") {
				t.Errorf("message %q", f.Message)
			}
		})
	}
}

func TestClassifySMIError(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		rc      *int
		kind    SMIFailureKind // "" for nil
		bus     string
		message string // a substring of Message
	}{
		{"missing", "nvidia-smi: not found on PATH or in /usr/bin", intp(127), SMIMissing, "", "not found"},
		{"shell not found", "sh: 1: nvidia-smi: not found\n", intp(127), SMIMissing, "", ""},
		{"curly apostrophe, wrapped", "NVIDIA-SMI has failed because it couldn\u2019t communicate with\nthe  NVIDIA driver.", intp(9), SMINoDriver, "", ""},
		{"could not", "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver", intp(9), SMINoDriver, "", ""},
		{"mismatch with version line", "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.183\n", intp(18), SMIVersionMismatch, "", "NVML library version: 535.183"},
		{"lost, wrapped", "Unable to determine the device handle for GPU0000:3B:00.0 GPU is lost", intp(15), SMIGPULost, "", ""},
		{"lost", "Unable to determine the device handle for GPU 00000000:3B:00.0: GPU is lost.  Reboot the system to recover this GPU", intp(15), SMIGPULost, "00000000:3B:00.0", ""},
		{"handle", "Unable to determine the device handle for GPU 0000:09:00.0: Unknown Error\n", intp(15), SMIDeviceHandle, "0000:09:00.0", "Unknown Error"},
		{"no devices", "No devices were found\n", intp(6), SMINoDevices, "", ""},
		{"timeout wins", "index, uuid\n0, GPU-a", intp(124), SMITimeout, "", ""},
		{"killed", "", intp(137), SMITimeout, "", ""},
		{"field refused", "Field \"mig.mode.current\" is not a valid field to query.\n", intp(2), SMIOther, "", "not a valid field"},
		{"other", "something odd", intp(3), SMIOther, "", "something odd"},
		{"success", "index, uuid\n0, GPU-a\n", intp(0), "", "", ""},
		{"unknown status, no message", "index, uuid\n", nil, "", "", ""},
		{"unknown status, message", "No devices were found", nil, SMINoDevices, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ClassifySMIError(tt.text, tt.rc)
			if tt.kind == "" {
				if f != nil {
					t.Fatalf("got %+v, want nil", f)
				}
				return
			}
			if f == nil {
				t.Fatalf("got nil, want %s", tt.kind)
			}
			if f.Kind != tt.kind || f.BusID != tt.bus || !strings.Contains(f.Message, tt.message) || !eqPtr(f.ExitCode, tt.rc) {
				t.Errorf("got %+v (rc %v), want kind %s bus %q message containing %q", f, showPtr(f.ExitCode), tt.kind, tt.bus, tt.message)
			}
		})
	}
}
