package dpop

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// Watch reads the nonce key file again whenever it changes after Watch
// returns, until ctx is done, and returns a channel closed once it has
// stopped. It sees a file edited in place and the link swap by which
// Kubernetes updates a mounted Secret, as a watched key file does, and reads
// the file every minute besides, so the distroless image, which has no
// shell to send SIGHUP from, follows a rotated Secret by itself. Each
// read is a [Nonces.ReloadLogged]: the same key changes nothing, a new
// key issues from then on while the previous one's nonces stay accepted
// for one lifetime, and a bad file is logged while the key in use stays.
func (n *Nonces) Watch(ctx context.Context, log *zap.Logger) <-chan struct{} {
	if log == nil {
		log = zap.NewNop()
	}
	return watchPath(ctx, n.path, log.With(zap.String("source", n.path)), func() {
		_, _ = n.ReloadLogged(log, time.Now())
	})
}

// ReloadLogged reloads n at now ([Nonces.Reload]) and logs a rotation or
// a refusal; it returns what Reload returned. The log names the file,
// never the key.
func (n *Nonces) ReloadLogged(log *zap.Logger, now time.Time) (changed bool, err error) {
	changed, err = n.Reload(now)
	switch {
	case err != nil:
		log.Error("DPoP nonce key reload refused; the previous key keeps serving", zap.String("source", n.path), zap.Error(err))
	case changed:
		log.Info("DPoP nonce key rotated; nonces of the previous key are accepted for one lifetime more",
			zap.String("source", n.path), zap.Duration("dpop_nonce_lifetime", n.lifetime))
	}
	return changed, err
}

// How a watched nonce key file is read again: settle after the last
// change event, since one update is several events (a Kubernetes volume
// update writes a new directory, then swaps a link to it), and every
// pollEvery in any case, for file systems that send no events; as for a
// key file.
const (
	watchSettle = 100 * time.Millisecond
	pollEvery   = time.Minute
)

// watchPath calls reload whenever path may have changed after watchPath
// returns (watchSettle after the last event of a burst), and every
// pollEvery, until ctx is done; the channel it returns is closed once it
// has stopped. It watches the directory of path and of where its links
// lead, and path itself when it is a directory, adding those a link swap
// brings. Without inotify it polls only.
func watchPath(ctx context.Context, path string, log *zap.Logger, reload func()) <-chan struct{} {
	done := make(chan struct{})
	var events <-chan fsnotify.Event
	var errs <-chan error
	w, err := fsnotify.NewWatcher()
	if err != nil {
		log.Warn("cannot watch for changes; reading every minute and on SIGHUP", zap.Error(err))
	} else {
		// Before watchPath returns: a change made after it is seen.
		addWatches(w, path, log)
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
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-events:
				if !ok {
					events = nil
				} else if ev.Op != fsnotify.Chmod {
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
					addWatches(w, path, log)
				}
			case <-poll.C:
				reload()
			}
		}
	}()
	return done
}

// addWatches adds to w the directories whose events can mean that path
// changed, as auth/keys does for a key file.
func addWatches(w *fsnotify.Watcher, path string, log *zap.Logger) {
	paths := []string{path}
	if resolved, err := filepath.EvalSymlinks(path); err == nil && resolved != path {
		paths = append(paths, resolved)
	}
	watching := w.WatchList()
	for _, p := range paths {
		dirs := []string{filepath.Dir(p)}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			dirs = append(dirs, p)
		}
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
}
