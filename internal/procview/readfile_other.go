//go:build !unix

package procview

import "os"

func readSmall(path string, _ []byte) ([]byte, error) { return os.ReadFile(path) }

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
