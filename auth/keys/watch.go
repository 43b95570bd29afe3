package keys

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// How a watched key file is read again: settle after the last change
// event, since one update is several events (a Kubernetes volume update
// writes a new directory, then swaps a link to it), and every pollEvery in
// any case, for file systems that send no events.
const (
	watchSettle = 100 * time.Millisecond
	pollEvery   = time.Minute
)

// Watch reads f again whenever what it was read from changes after Watch
// returns, until ctx is done, and returns a channel closed once it has
// stopped (see [WatchFile]). Each read is a [KeyFile.Reload]: the same
// bytes change nothing, new keys are logged, and a bad file is logged
// while the keys serving stay.
func (f *KeyFile) Watch(ctx context.Context, log *zap.Logger) <-chan struct{} {
	if log == nil {
		log = zap.NewNop()
	}
	// ReloadLogged names the source on its own lines; the watch's own
	// warnings name it here. One key, once, on every line.
	return WatchFile(ctx, f.path, log.With(zap.Stringer("source", f)), func() {
		_, _ = f.ReloadLogged(log)
	})
}

// WatchFile calls reload whenever the file at path may have changed after
// WatchFile returns (watchSettle after the last event of a burst), and
// every minute besides, until ctx is done; the channel it returns is
// closed once it has stopped. It watches the directory of path and that
// of the file a link resolves to (and path itself when it is a
// directory), adding those a link swap brings, which sees the link swap
// by which Kubernetes updates a mounted Secret or ConfigMap as well as an
// edit in place; the periodic read serves file systems that send no
// events, and the distroless image, which has no shell to send SIGHUP
// from. Without inotify it polls only. log, which names the file, takes
// the watch's own warnings.
func WatchFile(ctx context.Context, path string, log *zap.Logger, reload func()) <-chan struct{} {
	done := make(chan struct{})
	var events <-chan fsnotify.Event
	var errs <-chan error
	w, err := fsnotify.NewWatcher()
	if err != nil {
		log.Warn("cannot watch for changes; reading every minute and on SIGHUP", zap.Error(err))
	} else {
		// Before WatchFile returns: a change made after it is seen.
		watchDirs(w, path, log)
		events, errs = w.Events, w.Errors
	}
	go func() {
		defer close(done)
		if w != nil {
			defer w.Close()
		}
		poll := time.NewTicker(pollEvery)
		defer poll.Stop()
		settle := time.NewTimer(watchSettle)
		settle.Stop()
		resolved := resolve(path)
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-events:
				if !ok {
					events = nil
				} else if counts(ev, path, resolved) {
					settle.Reset(watchSettle)
				}
			case err, ok := <-errs:
				if !ok {
					errs = nil
				} else {
					log.Warn("watching for changes", zap.Error(err))
				}
			case <-settle.C:
				reload()
				if w != nil {
					watchDirs(w, path, log)
				}
				resolved = resolve(path)
			case <-poll.C:
				reload()
			}
		}
	}()
	return done
}

// counts reports whether ev, an event in a directory watched for path,
// can mean that path changed: a write to path or to resolved (where its
// link led when last read), or a file created, removed or renamed in the
// directory (an editor's save by rename, the link swap of a Kubernetes
// volume). Writes to other files, such as a log written beside the file,
// and changes of mode do not: every write of such a log would otherwise
// hold the reload back and then read the file again.
func counts(ev fsnotify.Event, path, resolved string) bool {
	if ev.Op&(fsnotify.Create|fsnotify.Remove|fsnotify.Rename) != 0 {
		return true
	}
	if !ev.Has(fsnotify.Write) {
		return false
	}
	name := filepath.Clean(ev.Name)
	return name == filepath.Clean(path) || name == resolved
}

// resolve returns where the links of path lead now, or path when they
// cannot be followed.
func resolve(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return filepath.Clean(path)
}

// watchDirs adds to w the directories whose events can mean that path
// changed: the path's own (and the path itself when it is a directory),
// and the same for where its links lead now.
func watchDirs(w *fsnotify.Watcher, path string, log *zap.Logger) {
	paths := []string{path}
	if resolved, err := filepath.EvalSymlinks(path); err == nil && resolved != path {
		paths = append(paths, resolved)
	}
	var dirs []string
	for _, p := range paths {
		dirs = append(dirs, filepath.Dir(p))
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			dirs = append(dirs, p)
		}
	}
	watching := w.WatchList()
	for _, d := range dirs {
		if slices.Contains(watching, d) {
			continue
		}
		if err := w.Add(d); err != nil {
			log.Warn("cannot watch for changes", zap.String("dir", d), zap.Error(err))
			continue
		}
		watching = append(watching, d)
	}
}

// ReloadLogged reloads f ([KeyFile.Reload]) and logs a change or a
// refusal, naming the source (log must not name it already); it returns
// what Reload returned.
func (f *KeyFile) ReloadLogged(log *zap.Logger) (changed bool, err error) {
	changed, err = f.Reload()
	switch {
	case err != nil:
		log.Error("key reload refused; the previous keys keep serving", zap.Stringer("source", f), zap.Error(err))
	case changed:
		log.Info("keys reloaded", zap.Stringer("source", f), zap.Int("keys", f.keys.Load().Len()))
	}
	return changed, err
}
