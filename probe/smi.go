package probe

import "strings"

// The nvidia-smi queries the probe runs, defined once: probe.sh is rendered with them (each
// @name@ in it is the constant of that name), node-check's gate runs the same ones (its
// answers must be those the probe would get), and parse reads a CSV without header in
// this field order. Fields are bare words ([a-z._]): they are written into shell text.
const (
	// GPUBaseFields are the --query-gpu fields every driver answers: the probe asks them
	// alone again when the driver refuses one of GPUFields.
	GPUBaseFields  = "index,uuid,name,pci.bus_id,memory.total,memory.used,memory.free,utilization.gpu,compute_mode,driver_version"
	gpuExtraFields = "memory.reserved,mig.mode.current,minor_number"
	// GPUFields are the --query-gpu fields the probe asks first.
	GPUFields = GPUBaseFields + "," + gpuExtraFields
	// AppsFields are the --query-compute-apps fields, pid first (the probe's apps-alive
	// reads it there). No process_name: it is a process's own text, where a newline would
	// start a row.
	AppsFields = "pid,gpu_uuid,used_memory"
	// SMIFormat is the --format of every query: a header row, numbers without units.
	SMIFormat = "csv,nounits"
)

// GPUQuery, GPUBasicQuery and AppsQuery are nvidia-smi's arguments for the probe's three
// queries: GPUFields, GPUBaseFields (after a refusal) and AppsFields.
func GPUQuery() []string { return []string{"--query-gpu=" + GPUFields, "--format=" + SMIFormat} }
func GPUBasicQuery() []string {
	return []string{"--query-gpu=" + GPUBaseFields, "--format=" + SMIFormat}
}
func AppsQuery() []string {
	return []string{"--query-compute-apps=" + AppsFields, "--format=" + SMIFormat}
}

// render fills the script's @name@ placeholders with the queries above.
func render(script string) string {
	return strings.NewReplacer(
		"@GPUBaseFields@", GPUBaseFields,
		"@gpuExtraFields@", gpuExtraFields,
		"@AppsFields@", AppsFields,
		"@SMIFormat@", SMIFormat,
	).Replace(script)
}
