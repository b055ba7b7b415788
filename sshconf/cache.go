package sshconf

import "sync"

// cachedFS answers each read, glob and existence check once and keeps each file's tokenized
// lines, for a Config.
type cachedFS struct {
	fs     fileSystem
	mu     sync.Mutex
	files  map[string]*cachedFile
	globs  map[string]cachedGlob
	exists map[string]bool
}

type cachedFile struct {
	data []byte
	err  error
	toks []tokLine // nil until a reader asks for them
}

type cachedGlob struct {
	matches []string
	err     error
}

func newCachedFS(fsys fileSystem) *cachedFS {
	return &cachedFS{fs: fsys, files: map[string]*cachedFile{}, globs: map[string]cachedGlob{}, exists: map[string]bool{}}
}

func (c *cachedFS) file(name string) *cachedFile {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.files[name]
	if !ok {
		f = &cachedFile{}
		f.data, f.err = c.fs.ReadFile(name)
		c.files[name] = f
	}
	return f
}

func (c *cachedFS) ReadFile(name string) ([]byte, error) {
	f := c.file(name)
	return f.data, f.err
}

// lines returns the tokenized lines of a file read through c. data is what ReadFile returned
// for path.
func (c *cachedFS) lines(path string, data []byte) []tokLine {
	f := c.file(path)
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.toks == nil {
		f.toks = tokenize(data)
	}
	return f.toks
}

func (c *cachedFS) Glob(pattern string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.globs[pattern]
	if !ok {
		g.matches, g.err = c.fs.Glob(pattern)
		c.globs[pattern] = g
	}
	return g.matches, g.err
}

func (c *cachedFS) Exists(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.exists[name]
	if !ok {
		e = c.fs.Exists(name)
		c.exists[name] = e
	}
	return e
}
