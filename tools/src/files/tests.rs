use std::os::unix::fs::symlink;

use super::*;

fn setup() -> (tempfile::TempDir, FileAccess) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let access = FileAccess::new(&[dir.path().join("ws")]).unwrap();
    (dir, access)
}

#[test]
fn paths_stay_inside_the_roots() {
    let (dir, access) = setup();
    let ws = dir.path().join("ws").canonicalize().unwrap();
    std::fs::write(dir.path().join("secret"), "s").unwrap();
    symlink(dir.path().join("secret"), ws.join("escape")).unwrap();
    symlink(dir.path(), ws.join("up")).unwrap();
    std::fs::create_dir(ws.join("sub")).unwrap();
    symlink(ws.join("sub"), ws.join("inner-link")).unwrap();

    assert_eq!(access.resolve("a.txt").unwrap(), ws.join("a.txt"));
    assert_eq!(
        access.resolve("new/dir/b.txt").unwrap(),
        ws.join("new/dir/b.txt")
    );
    assert_eq!(access.resolve("sub/../c.txt").unwrap(), ws.join("c.txt"));
    assert_eq!(
        access
            .resolve(&ws.join("d.txt").display().to_string())
            .unwrap(),
        ws.join("d.txt")
    );
    assert_eq!(
        access.resolve("inner-link/e.txt").unwrap(),
        ws.join("sub/e.txt")
    );
    for outside in [
        "../secret",
        "/etc/passwd",
        "escape",
        "up/secret",
        "up/new-file",
        "sub/../../secret",
        "",
    ] {
        assert!(
            access.resolve(outside).is_err(),
            "{outside} must be refused"
        );
    }
}

#[test]
fn writes_need_a_fresh_read_of_existing_files() {
    let (_dir, access) = setup();
    let main = TrajectoryId::main();
    let path = access.resolve("notes.txt").unwrap();
    assert!(
        access.check_write(&main, &path).is_ok(),
        "a new file may be created"
    );
    std::fs::write(&path, "v1").unwrap();
    let err = access.check_write(&main, &path).unwrap_err();
    assert!(err.contains("read it with fs_read first"), "{err}");
    access.record_read(&main, &path, FileStamp::of(&path).unwrap());
    assert!(access.check_write(&main, &path).is_ok());
    let lane = TrajectoryId::lane(steward_events::EventId::generate());
    assert!(
        access.check_write(&lane, &path).is_err(),
        "a read in another trajectory does not count"
    );
    std::fs::write(&path, "v2 changed behind the tool's back").unwrap();
    let err = access.check_write(&main, &path).unwrap_err();
    assert!(err.contains("changed since it was read"), "{err}");
}
