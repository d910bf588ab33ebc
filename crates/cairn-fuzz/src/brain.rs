//! The brain the engine-level targets share: a real SQLite file in a temporary folder, one per
//! thread, opened with a fixed clock and replaced every [`BRAIN_USES`] inputs.

use cairn_engine::{Context, Engine};
use std::cell::RefCell;

/// Inputs one brain takes before it is replaced by a fresh one (bounds its size, so a long run
/// does not slow down as it grows).
pub const BRAIN_USES: usize = 5_000;

struct Brain {
    engine: Engine,
    uses: usize,
    // Dropped after the engine: the folder goes when the brain does.
    _folder: tempfile::TempDir,
}

impl Brain {
    fn new() -> Brain {
        let folder = tempfile::tempdir().expect("a temporary folder for the brain");
        let context = Context {
            project: "fuzz".into(),
            cwd: folder.path().to_path_buf(),
            actor: "fuzz".into(),
            read_only: false,
            now: Some(crate::wiki::now()),
        };
        let engine =
            Engine::open(&folder.path().join("brain.db"), context).expect("a fresh brain opens");
        Brain {
            engine,
            uses: 0,
            _folder: folder,
        }
    }
}

thread_local! {
    static BRAIN: RefCell<Option<Brain>> = const { RefCell::new(None) };
}

/// Runs `work` on this thread's brain.
pub(crate) fn with_engine<T>(work: impl FnOnce(&mut Engine) -> T) -> T {
    BRAIN.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|brain| brain.uses >= BRAIN_USES) {
            *slot = None;
            *slot = Some(Brain::new());
        }
        let brain = slot.as_mut().expect("a brain was just made");
        brain.uses += 1;
        work(&mut brain.engine)
    })
}
