package whatsapp

// How old the whatsmeow in this build is. WhatsApp retires client builds (it refused
// whatsmeow builds again on 2026-09-15, and only a library release fixed that, whatever web
// version was announced), so an old pin is a risk of every session going down with 405. The
// age is the commit date in whatsmeow's pseudo-version, read from the build information;
// README, "Bumping whatsmeow", says how to move it.

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"
)

const (
	libraryModule = "go.mau.fi/whatsmeow"
	// libraryWarnAge: past this the gateway warns at start.
	libraryWarnAge = 30 * 24 * time.Hour
)

// Library returns the whatsmeow module version of this build and its commit date (ok false
// when the build carries no module information: test binaries have none).
func Library() (version string, date time.Time, ok bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", time.Time{}, false
	}
	return libraryIn(info)
}

// libraryIn finds whatsmeow in a build's module information.
func libraryIn(info *debug.BuildInfo) (version string, date time.Time, ok bool) {
	for _, dep := range info.Deps {
		if dep.Path != libraryModule {
			continue
		}
		if dep.Replace != nil && dep.Replace.Version != "" && dep.Replace.Version != "(devel)" {
			// A module replacement carries its own version; a directory (the patched copy
			// under third_party/, which is the pinned version) carries "(devel)".
			dep = dep.Replace
		}
		date, err := pseudoVersionTime(dep.Version)
		return dep.Version, date, err == nil
	}
	return "", time.Time{}, false
}

// LibraryAgeDays is the age of this build's whatsmeow in days at now.
func LibraryAgeDays(now time.Time) (float64, bool) {
	_, date, ok := Library()
	if !ok {
		return 0, false
	}
	return now.Sub(date).Hours() / 24, true
}

// pseudoVersionTime reads the commit time of a Go pseudo-version (vX.Y.Z-yyyymmddhhmmss-hash,
// or with a pre-release prefix before the time: vX.Y.Z-pre.0.yyyymmddhhmmss-hash).
func pseudoVersionTime(v string) (time.Time, error) {
	parts := strings.Split(v, "-")
	if len(parts) < 3 {
		return time.Time{}, fmt.Errorf("%q is not a pseudo-version", v)
	}
	stamp := parts[len(parts)-2]
	if i := strings.LastIndexByte(stamp, '.'); i >= 0 {
		stamp = stamp[i+1:]
	}
	if len(stamp) != 14 {
		return time.Time{}, fmt.Errorf("%q is not a pseudo-version", v)
	}
	return time.Parse("20060102150405", stamp)
}

// warnLibraryAge logs a WARN when this build's whatsmeow is older than libraryWarnAge at now.
func warnLibraryAge(log *slog.Logger, now time.Time) {
	if version, date, ok := Library(); ok {
		warnAge(log, version, date, now)
	}
}

func warnAge(log *slog.Logger, version string, date, now time.Time) {
	if now.Sub(date) <= libraryWarnAge {
		return
	}
	log.Warn(fmt.Sprintf("whatsmeow in this build is %d days old; WhatsApp refuses old client builds (405), so update the gateway or bump whatsmeow (README, \"Bumping whatsmeow\")",
		int(now.Sub(date).Hours()/24)), "module", libraryModule, "version", version, "date", date.Format(time.DateOnly))
}
