//! `cairn install <client>` round trips on temporary home directories: install writes where the
//! client reads, a second install changes nothing, `--dry-run` prints a diff and touches
//! nothing, `--uninstall` gives back the file the user had, invalid files are refused untouched.

mod common;

use common::Brain;
use serde_json::Value;
use std::path::{Path, PathBuf};

struct Home {
    brain: Brain,
    home: PathBuf,
}

impl Home {
    fn new() -> Home {
        let brain = Brain::new();
        let home = brain.dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        Home { brain, home }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.home.join(relative)
    }

    fn install(&self, args: &[&str], code: i32) -> (String, String) {
        let output = self
            .brain
            .cmd()
            .env("HOME", &self.home)
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CODEX_HOME")
            .args(["install", "--command", "/opt/cairn/bin/cairn"])
            .args(args)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        assert_eq!(
            output.status.code(),
            Some(code),
            "{args:?}\n{stdout}\n{stderr}"
        );
        (stdout, stderr)
    }

    fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative)).unwrap_or_default()
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn backups(&self, dir: &str) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(self.path(dir)) else {
            return Vec::new();
        };
        let mut found: Vec<PathBuf> = entries
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().contains(".cairn-backup-"))
            .collect();
        found.sort();
        found
    }
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn commands(settings: &Value, event: &str) -> Vec<String> {
    settings["hooks"][event]
        .as_array()
        .map(|groups| {
            groups
                .iter()
                .flat_map(|g| g["hooks"].as_array().cloned().unwrap_or_default())
                .map(|h| h["command"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

const USER_SETTINGS: &str = r#"{
  "theme": "dark",
  "hooks": {
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "notify-send done"
          }
        ]
      }
    ]
  },
  "permissions": {
    "allow": [
      "Bash(ls:*)"
    ]
  }
}
"#;

#[test]
fn claude_code_round_trip_keeps_the_users_settings() {
    let home = Home::new();
    home.write(".claude/settings.json", USER_SETTINGS);
    home.write(
        ".claude.json",
        "{\"numStartups\": 3, \"mcpServers\": {\"other\": {\"command\": \"x\"}}}\n",
    );

    // dry run: a diff, nothing written
    let (stdout, _) = home.install(&["claude-code", "--dry-run"], 0);
    assert!(
        stdout.contains("+") && stdout.contains("hook session-start"),
        "{stdout}"
    );
    assert!(stdout.contains("dry run"), "{stdout}");
    assert_eq!(home.read(".claude/settings.json"), USER_SETTINGS);

    home.install(&["claude-code"], 0);
    let settings = json(&home.read(".claude/settings.json"));
    assert_eq!(settings["theme"], "dark");
    assert_eq!(
        commands(&settings, "Stop"),
        vec!["notify-send done", "/opt/cairn/bin/cairn hook stop"]
    );
    for (event, cairn_event) in [
        ("SessionStart", "session-start"),
        ("UserPromptSubmit", "user-prompt-submit"),
        ("PreCompact", "pre-compact"),
        ("SessionEnd", "session-end"),
    ] {
        assert_eq!(
            commands(&settings, event),
            vec![format!("/opt/cairn/bin/cairn hook {cairn_event}")]
        );
    }
    assert_eq!(
        settings["hooks"]["SessionStart"][0]["matcher"],
        "startup|resume|clear|compact"
    );
    assert_eq!(
        settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["timeout"],
        5
    );
    // the key order of the user's file is kept
    let text = home.read(".claude/settings.json");
    assert!(text.find("\"theme\"").unwrap() < text.find("\"hooks\"").unwrap());
    assert!(text.find("\"hooks\"").unwrap() < text.find("\"permissions\"").unwrap());
    let state = json(&home.read(".claude.json"));
    assert_eq!(
        state["mcpServers"]["cairn"]["command"],
        "/opt/cairn/bin/cairn"
    );
    assert_eq!(
        state["mcpServers"]["cairn"]["args"],
        serde_json::json!(["mcp"])
    );
    assert_eq!(state["mcpServers"]["other"]["command"], "x");
    assert_eq!(state["numStartups"], 3);
    assert_eq!(
        home.backups(".claude").len(),
        1,
        "one backup of settings.json"
    );

    // idempotent: a second install changes nothing and makes no backup
    let before = home.read(".claude/settings.json");
    let (stdout, _) = home.install(&["claude-code"], 0);
    assert!(stdout.contains("unchanged"), "{stdout}");
    assert_eq!(home.read(".claude/settings.json"), before);
    assert_eq!(home.backups(".claude").len(), 1);

    // uninstall gives back what the user had
    home.install(&["claude-code", "--uninstall"], 0);
    assert_eq!(
        json(&home.read(".claude/settings.json")),
        json(USER_SETTINGS)
    );
    let state = json(&home.read(".claude.json"));
    assert!(state["mcpServers"].get("cairn").is_none());
    assert_eq!(state["mcpServers"]["other"]["command"], "x");
}

#[test]
fn installing_into_an_empty_home_then_uninstalling_leaves_nothing() {
    let home = Home::new();
    for client in ["claude-code", "cursor", "gemini", "codex"] {
        home.install(&[client], 0);
    }
    assert!(home.path(".claude/settings.json").exists());
    assert!(home.path(".cursor/mcp.json").exists());
    assert!(home.path(".cursor/hooks.json").exists());
    assert!(home.path(".gemini/settings.json").exists());
    assert!(home.path(".codex/config.toml").exists());
    for client in ["claude-code", "cursor", "gemini", "codex"] {
        home.install(&[client, "--uninstall"], 0);
    }
    for file in [
        ".claude/settings.json",
        ".claude.json",
        ".cursor/mcp.json",
        ".cursor/hooks.json",
        ".gemini/settings.json",
        ".codex/config.toml",
    ] {
        assert!(!home.path(file).exists(), "{file}: {}", home.read(file));
    }
}

#[test]
fn cursor_gemini_and_codex_are_written_where_they_read() {
    let home = Home::new();
    home.install(&["cursor"], 0);
    let mcp = json(&home.read(".cursor/mcp.json"));
    assert_eq!(
        mcp["mcpServers"]["cairn"]["args"],
        serde_json::json!(["mcp"])
    );
    let hooks = json(&home.read(".cursor/hooks.json"));
    assert_eq!(hooks["version"], 1);
    assert_eq!(
        hooks["hooks"]["sessionStart"][0]["command"],
        "/opt/cairn/bin/cairn hook session-start --client cursor"
    );
    assert_eq!(
        hooks["hooks"]["afterAgentResponse"][0]["command"],
        "/opt/cairn/bin/cairn hook stop --client cursor"
    );

    home.write(
        ".gemini/settings.json",
        "{\"theme\": \"GitHub\", \"mcpServers\": {}}\n",
    );
    home.install(&["gemini"], 0);
    let gemini = json(&home.read(".gemini/settings.json"));
    assert_eq!(gemini["theme"], "GitHub");
    assert_eq!(
        gemini["mcpServers"]["cairn"]["command"],
        "/opt/cairn/bin/cairn"
    );
    assert_eq!(
        gemini["hooks"]["BeforeAgent"][0]["hooks"][0]["command"],
        "/opt/cairn/bin/cairn hook user-prompt-submit --client gemini"
    );
    assert_eq!(
        gemini["hooks"]["AfterAgent"][0]["hooks"][0]["timeout"], 10000,
        "Gemini reads milliseconds"
    );

    let codex_before =
        "# my codex config\nmodel = \"o4\"\n\n[mcp_servers.other]\ncommand = \"x\"\n";
    home.write(".codex/config.toml", codex_before);
    home.install(&["codex"], 0);
    let codex = home.read(".codex/config.toml");
    assert!(
        codex.starts_with("# my codex config\nmodel = \"o4\""),
        "{codex}"
    );
    assert!(codex.contains("[mcp_servers.cairn]"), "{codex}");
    assert!(
        codex.contains("command = \"/opt/cairn/bin/cairn\""),
        "{codex}"
    );
    assert!(codex.contains("args = [\"mcp\"]"), "{codex}");
    let (stdout, _) = home.install(&["codex"], 0);
    assert!(stdout.contains("unchanged"), "{stdout}");
    home.install(&["codex", "--uninstall"], 0);
    assert_eq!(home.read(".codex/config.toml"), codex_before);
}

#[test]
fn invalid_config_files_are_refused_untouched() {
    let home = Home::new();
    home.write(".claude/settings.json", "{\"theme\": \"dark\",, }");
    let (_, stderr) = home.install(&["claude-code"], 1);
    assert!(stderr.contains("is not valid JSON"), "{stderr}");
    assert!(stderr.contains("nothing was changed"), "{stderr}");
    assert_eq!(
        home.read(".claude/settings.json"),
        "{\"theme\": \"dark\",, }"
    );
    assert!(!home.path(".claude.json").exists(), "no file was written");

    home.write(".codex/config.toml", "model = \n[[broken");
    let (_, stderr) = home.install(&["codex"], 1);
    assert!(stderr.contains("is not valid TOML"), "{stderr}");
    assert_eq!(home.read(".codex/config.toml"), "model = \n[[broken");

    let (_, stderr) = home.install(&["vscode"], 2);
    assert!(
        stderr.contains("claude-code, codex, cursor, gemini"),
        "{stderr}"
    );
}

#[test]
fn an_installed_hook_command_runs() {
    // The command the installer writes is a real invocation of this binary.
    let home = Home::new();
    let binary = assert_cmd::cargo::cargo_bin("cairn");
    let output = home
        .brain
        .cmd()
        .env("HOME", &home.home)
        .args(["install", "claude-code"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let settings = json(&home.read(".claude/settings.json"));
    let command = commands(&settings, "SessionStart")[0].clone();
    assert!(
        command.starts_with(&binary.display().to_string()),
        "{command}"
    );
    let payload = format!(
        "{{\"session_id\":\"s1\",\"cwd\":\"{}\",\"hook_event_name\":\"SessionStart\",\"source\":\"startup\"}}",
        home.brain.dir.path().display()
    );
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(&command)
        .env("CAIRN_DB", &home.brain.db)
        .env("CAIRN_DAEMON", "off")
        .env("CAIRN_PROJECT", "test-project")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(payload.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(output.status.success());
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        answer["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .unwrap()
            .contains("cairn brief")
    );
    let _ = Path::new("unused");
}

#[test]
fn the_claude_code_plugin_directory_works_as_installed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugin/claude-code");
    let manifest = json(&std::fs::read_to_string(root.join(".claude-plugin/plugin.json")).unwrap());
    assert_eq!(manifest["name"], "cairn");
    let mcp = json(&std::fs::read_to_string(root.join(".mcp.json")).unwrap());
    assert_eq!(mcp["mcpServers"]["cairn"]["args"][1], "mcp");
    let hooks = json(&std::fs::read_to_string(root.join("hooks/hooks.json")).unwrap());
    let home = Home::new();
    let binary = assert_cmd::cargo::cargo_bin("cairn");
    let payload = format!(
        "{{\"session_id\":\"p1\",\"cwd\":\"{}\",\"hook_event_name\":\"SessionStart\",\"source\":\"startup\",\"prompt\":\"hello there world\",\"transcript_path\":\"/nonexistent\"}}",
        home.brain.dir.path().display()
    );
    let run = |command: &str, with_binary: bool| {
        let command = command.replace("${CLAUDE_PLUGIN_ROOT}", &root.display().to_string());
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c")
            .arg(&command)
            .env("CAIRN_DB", &home.brain.db)
            .env("CAIRN_DAEMON", "off")
            .env("CAIRN_PROJECT", "test-project")
            .env("HOME", &home.home)
            .env("PATH", "/usr/bin:/bin")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        if with_binary {
            cmd.env("CAIRN_BIN", &binary);
        } else {
            cmd.env_remove("CAIRN_BIN");
        }
        let mut child = cmd.spawn().unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(payload.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    for event in [
        "SessionStart",
        "UserPromptSubmit",
        "Stop",
        "PreCompact",
        "SessionEnd",
    ] {
        let command = hooks["hooks"][event][0]["hooks"][0]["command"]
            .as_str()
            .unwrap()
            .to_string();
        let output = run(&command, true);
        assert!(output.status.success(), "{event}");
        if event == "SessionStart" {
            let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
            assert_eq!(
                answer["hookSpecificOutput"]["hookEventName"],
                "SessionStart"
            );
        }
        // without the binary installed a hook still exits 0 and says nothing
        let output = run(&command, false);
        assert!(output.status.success(), "{event} without cairn");
        assert!(output.stdout.is_empty());
    }
}
