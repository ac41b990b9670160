use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;

fn setup() -> (tempfile::TempDir, FileAccess) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    std::fs::create_dir(dir.path().join("outside")).unwrap();
    let access = FileAccess::new(&[dir.path().join("ws")]).unwrap();
    (dir, access)
}

/// Everything in `dir`, for checking that nothing appeared there.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn paths_are_taken_beneath_a_root_by_their_text() {
    let (_dir, access) = setup();
    let ws = access.roots()[0].clone();
    let path = |requested: &str| access.resolve(requested).map(|at| at.path().to_owned());
    assert_eq!(path("a.txt").unwrap(), ws.join("a.txt"));
    assert_eq!(path("new/dir/b.txt").unwrap(), ws.join("new/dir/b.txt"));
    assert_eq!(path("sub/../c.txt").unwrap(), ws.join("c.txt"));
    assert_eq!(
        path(&ws.join("d.txt").display().to_string()).unwrap(),
        ws.join("d.txt")
    );
    for outside in ["../secret", "/etc/passwd", "sub/../../secret", ""] {
        assert!(path(outside).is_err(), "{outside} must be refused");
    }
}

#[test]
fn symlinks_lead_nowhere_outside_and_anywhere_inside() {
    let (dir, access) = setup();
    let ws = access.roots()[0].clone();
    let outside = dir.path().join("outside");
    std::fs::write(outside.join("secret"), "s").unwrap();
    symlink(outside.join("secret"), ws.join("escape")).unwrap();
    symlink("../outside/secret", ws.join("relative-escape")).unwrap();
    symlink(&outside, ws.join("up")).unwrap();
    std::fs::create_dir(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/e.txt"), "inside").unwrap();
    symlink("sub", ws.join("inner-link")).unwrap();
    symlink(ws.join("sub"), ws.join("absolute-inner-link")).unwrap();
    symlink("/proc/self/root/etc/passwd", ws.join("magic")).unwrap();

    let at = access.resolve("inner-link/e.txt").unwrap();
    assert_eq!(access.read_stamped(&at, 100).unwrap().0, b"inside");
    // An absolute symlink is refused even when it points inside: the kernel resolves
    // beneath the root only, and `/` is not beneath it.
    for escape in [
        "escape",
        "relative-escape",
        "up/secret",
        "magic",
        "absolute-inner-link/e.txt",
    ] {
        let at = access.resolve(escape).unwrap();
        let err = access.read_stamped(&at, 100).unwrap_err();
        assert!(
            err.contains("outside the allowed roots") || err.contains("magic link"),
            "{escape}: {err}"
        );
    }
    // A write through a symlinked parent creates nothing outside.
    let at = access.resolve("up/new-file").unwrap();
    assert!(access.write_atomically(&at, b"x").is_err());
    assert_eq!(names(&outside), ["secret"]);
    // A listing through it is refused too.
    assert!(access.list(&access.resolve("up").unwrap()).is_err());
}

/// The path is checked while `sub` is a directory of the workspace, then `sub` becomes a
/// symlink to a folder outside before the file is used: the use is refused, because the
/// kernel resolves the path again beneath the root at the open.
#[test]
fn a_directory_swapped_for_a_symlink_after_the_check_leads_nowhere() {
    let (dir, access) = setup();
    let ws = access.roots()[0].clone();
    let outside = dir.path().join("outside");
    std::fs::create_dir(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/note.txt"), "mine").unwrap();
    std::fs::write(outside.join("note.txt"), "theirs").unwrap();
    let note = access.resolve("sub/note.txt").unwrap();
    let fresh = access.resolve("sub/fresh.txt").unwrap();
    assert!(access.check_write(&TrajectoryId::main(), &fresh).is_ok());

    std::fs::rename(ws.join("sub"), ws.join("moved")).unwrap();
    symlink(&outside, ws.join("sub")).unwrap();

    assert!(access.read_stamped(&note, 100).is_err(), "not read outside");
    assert!(access.write_atomically(&fresh, b"x").is_err());
    assert!(access.write_atomically(&note, b"x").is_err());
    assert_eq!(names(&outside), ["note.txt"]);
    assert_eq!(
        std::fs::read_to_string(outside.join("note.txt")).unwrap(),
        "theirs"
    );
}

/// The same race while it happens: a thread flips `sub` between a directory and a symlink
/// to the outside folder while writes and reads go on. Whatever interleaving the scheduler
/// picks, nothing is written or read outside.
#[test]
fn a_directory_flipped_during_writes_never_leads_outside() {
    let (dir, access) = setup();
    let ws = access.roots()[0].clone();
    let outside = dir.path().join("outside");
    std::fs::write(outside.join("secret"), "theirs").unwrap();
    std::fs::create_dir(ws.join("sub")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (ws, outside, stop) = (ws.clone(), outside.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::rename(ws.join("sub"), ws.join("real"));
                let _ = symlink(&outside, ws.join("sub"));
                let _ = std::fs::remove_file(ws.join("sub"));
                let _ = std::fs::rename(ws.join("real"), ws.join("sub"));
            }
        })
    };
    let target = access.resolve("sub/secret").unwrap();
    let mut written = 0;
    // At least 2,000 rounds, and on until one write found the real directory: how often the
    // flipper leaves it in place is up to the scheduler (on a busy machine 2,000 rounds once
    // met none).
    let mut rounds = 0;
    while rounds < 2000 || (written == 0 && rounds < 200_000) {
        rounds += 1;
        if access.write_atomically(&target, b"mine").is_ok() {
            written += 1;
        }
        if let Ok((bytes, _)) = access.read_stamped(&target, 100) {
            assert_eq!(bytes, b"mine", "a read never reaches the outside file");
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    assert_eq!(names(&outside), ["secret"]);
    assert_eq!(
        std::fs::read_to_string(outside.join("secret")).unwrap(),
        "theirs"
    );
    assert!(written > 0, "some writes found the real directory");
}

/// Temporary files have random names opened with O_EXCL | O_NOFOLLOW: a symlink planted
/// where a predictable name would be (the old scheme used the process id) is not written
/// through, and the write still lands.
#[test]
fn a_planted_temp_name_symlink_is_not_written_through() {
    let (dir, access) = setup();
    let ws = access.roots()[0].clone();
    let outside = dir.path().join("outside");
    std::fs::write(outside.join("target"), "theirs").unwrap();
    let planted = ws.join(format!(".out.txt.steward-{}.tmp", std::process::id()));
    symlink(outside.join("target"), &planted).unwrap();

    let at = access.resolve("out.txt").unwrap();
    assert!(access.write_atomically(&at, b"mine").unwrap(), "new file");
    assert_eq!(std::fs::read_to_string(ws.join("out.txt")).unwrap(), "mine");
    assert_eq!(
        std::fs::read_to_string(outside.join("target")).unwrap(),
        "theirs"
    );
    assert!(planted.symlink_metadata().unwrap().is_symlink());
    // No temp file is left behind.
    assert_eq!(names(&ws).len(), 2, "{:?}", names(&ws));
}

#[test]
fn a_write_keeps_the_mode_and_replaces_a_symlink_rather_than_following_it() {
    let (dir, access) = setup();
    let ws = access.roots()[0].clone();
    let outside = dir.path().join("outside");
    std::fs::write(outside.join("target"), "theirs").unwrap();
    symlink(outside.join("target"), ws.join("link")).unwrap();
    let at = access.resolve("link").unwrap();
    assert!(!access.write_atomically(&at, b"mine").unwrap());
    assert_eq!(
        std::fs::read_to_string(outside.join("target")).unwrap(),
        "theirs"
    );
    assert!(!ws.join("link").symlink_metadata().unwrap().is_symlink());

    use std::os::unix::fs::PermissionsExt;
    std::fs::write(ws.join("run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(ws.join("run.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    let at = access.resolve("run.sh").unwrap();
    access
        .write_atomically(&at, b"#!/bin/sh\necho hi\n")
        .unwrap();
    let mode = std::fs::metadata(ws.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o750);
}

#[test]
fn writes_need_a_fresh_read_of_existing_files() {
    let (_dir, access) = setup();
    let main = TrajectoryId::main();
    let at = access.resolve("notes.txt").unwrap();
    assert!(
        access.check_write(&main, &at).is_ok(),
        "a new file may be created"
    );
    std::fs::write(at.path(), "v1").unwrap();
    let err = access.check_write(&main, &at).unwrap_err();
    assert!(err.contains("read it with fs_read first"), "{err}");
    let (_, stamp) = access.read_stamped(&at, 100).unwrap();
    access.record_read(&main, &at, stamp);
    assert!(access.check_write(&main, &at).is_ok());
    let lane = TrajectoryId::lane(steward_events::EventId::generate());
    assert!(
        access.check_write(&lane, &at).is_err(),
        "a read in another trajectory does not count"
    );
    std::fs::write(at.path(), "v2 changed behind the tool's back").unwrap();
    let err = access.check_write(&main, &at).unwrap_err();
    assert!(err.contains("changed since it was read"), "{err}");
}
