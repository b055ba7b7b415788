package probe

// Unminified is the rendered probe before shmin.Minify, for the test that runs both.
func Unminified() string { return render(script) }
