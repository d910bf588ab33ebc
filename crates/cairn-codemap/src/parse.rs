//! Parsing with the real grammars (tree-sitter): a file's definitions (name, kind, line,
//! signature line) and the identifiers it uses. A file with syntax errors is mapped as far as
//! the parser recovered (`FileParse::errors`), never refused.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use tree_sitter::{Language, Node, Parser};

/// The languages the map parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    Rust,
    Python,
    TypeScript,
    Tsx,
    JavaScript,
    Go,
    Java,
    C,
    Cpp,
}

impl Lang {
    /// The language of a path, by its extension (`.h` is read as C).
    pub fn from_path(path: &str) -> Option<Lang> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let ext = name.rsplit_once('.')?.1;
        Some(match ext {
            "rs" => Lang::Rust,
            "py" | "pyi" => Lang::Python,
            "ts" | "mts" | "cts" => Lang::TypeScript,
            "tsx" => Lang::Tsx,
            "js" | "jsx" | "mjs" | "cjs" => Lang::JavaScript,
            "go" => Lang::Go,
            "java" => Lang::Java,
            "c" | "h" => Lang::C,
            "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => Lang::Cpp,
            _ => return None,
        })
    }

    /// The lowercase name (`rust`, `tsx`, …), as the JSON and the store spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Python => "python",
            Lang::TypeScript => "typescript",
            Lang::Tsx => "tsx",
            Lang::JavaScript => "javascript",
            Lang::Go => "go",
            Lang::Java => "java",
            Lang::C => "c",
            Lang::Cpp => "cpp",
        }
    }

    /// Every language, in a fixed order (its position is its code in the binary index).
    pub const ALL: [Lang; 9] = [
        Lang::Rust,
        Lang::Python,
        Lang::TypeScript,
        Lang::Tsx,
        Lang::JavaScript,
        Lang::Go,
        Lang::Java,
        Lang::C,
        Lang::Cpp,
    ];

    /// The language named `name` (as [`Lang::as_str`] spells it).
    pub fn from_name(name: &str) -> Option<Lang> {
        Lang::ALL.into_iter().find(|l| l.as_str() == name)
    }

    pub(crate) fn code(self) -> u8 {
        Lang::ALL.iter().position(|&l| l == self).expect("listed") as u8
    }

    fn grammar(self) -> Language {
        match self {
            Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
            Lang::Python => tree_sitter_python::LANGUAGE.into(),
            Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Lang::Go => tree_sitter_go::LANGUAGE.into(),
            Lang::Java => tree_sitter_java::LANGUAGE.into(),
            Lang::C => tree_sitter_c::LANGUAGE.into(),
            Lang::Cpp => tree_sitter_cpp::LANGUAGE.into(),
        }
    }
}

/// What a definition is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Trait, interface.
    Interface,
    /// Struct, class, enum, union, type alias, typedef.
    Type,
    Function,
    Method,
    Constant,
    Macro,
    Module,
}

impl Kind {
    const ALL: [Kind; 7] = [
        Kind::Interface,
        Kind::Type,
        Kind::Function,
        Kind::Method,
        Kind::Constant,
        Kind::Macro,
        Kind::Module,
    ];

    pub(crate) fn code(self) -> u8 {
        Kind::ALL.iter().position(|&k| k == self).expect("listed") as u8
    }

    pub(crate) fn from_code(code: u8) -> Option<Kind> {
        Kind::ALL.get(usize::from(code)).copied()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Interface => "interface",
            Kind::Type => "type",
            Kind::Function => "function",
            Kind::Method => "method",
            Kind::Constant => "constant",
            Kind::Macro => "macro",
            Kind::Module => "module",
        }
    }
}

/// One definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Def {
    pub name: String,
    pub kind: Kind,
    /// 1-based line of the definition's first line.
    pub line: u32,
    /// That line, trimmed, at most `SIGNATURE_CHARS` characters.
    pub signature: String,
    /// Not nested inside a function or a type.
    pub top_level: bool,
}

/// Longest signature kept (characters); a longer line is cut with `…`.
pub const SIGNATURE_CHARS: usize = 160;

/// A parsed file: its definitions in line order, the identifiers it uses with their counts
/// (names sorted), and whether the parser had to recover from syntax errors.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileParse {
    pub defs: Vec<Def>,
    pub refs: BTreeMap<String, u32>,
    pub errors: bool,
}

/// Parses `text` as `lang`. Never fails: a parser that gives up yields an empty parse marked
/// `errors`.
pub fn parse_source(lang: Lang, text: &str) -> FileParse {
    let mut parser = Parser::new();
    if parser.set_language(&lang.grammar()).is_err() {
        return FileParse {
            errors: true,
            ..FileParse::default()
        };
    }
    let Some(tree) = parser.parse(text, None) else {
        return FileParse {
            errors: true,
            ..FileParse::default()
        };
    };
    let root = tree.root_node();
    let src = text.as_bytes();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = FileParse {
        errors: root.has_error(),
        ..FileParse::default()
    };
    let mut name_nodes: HashSet<usize> = HashSet::new();
    // Depth-first, children in order, with one cursor (no allocation per node). `nest[k]` is
    // what the children of the k-th ancestor on the path inherit: (inside a type body, inside
    // a function).
    let mut cursor = root.walk();
    let mut nest: Vec<(bool, bool)> = Vec::new();
    loop {
        let node = cursor.node();
        let (in_type, in_fn) = nest.last().copied().unwrap_or((false, false));
        let mut child_in_type = in_type;
        let mut child_in_fn = in_fn;
        if let Some((kind, name_node)) = classify(lang, node, in_type, in_fn, src) {
            let name = text_of(name_node, src);
            if !name.is_empty() {
                name_nodes.insert(name_node.id());
                let row = node.start_position().row;
                out.defs.push(Def {
                    name: last_segment(name).to_string(),
                    kind,
                    line: u32::try_from(row + 1).unwrap_or(u32::MAX),
                    signature: signature(lines.get(row).copied().unwrap_or("")),
                    top_level: !in_type && !in_fn,
                });
            }
            match kind {
                Kind::Function | Kind::Method => child_in_fn = true,
                Kind::Type | Kind::Interface => child_in_type = true,
                _ => {}
            }
        }
        if is_type_container(lang, node.kind()) {
            child_in_type = true;
        }
        if cursor.goto_first_child() {
            nest.push((child_in_type, child_in_fn));
            continue;
        }
        if is_identifier(node.kind()) && !name_nodes.contains(&node.id()) {
            let word = text_of(node, src);
            if !word.is_empty() {
                match out.refs.get_mut(word) {
                    Some(count) => *count += 1,
                    None => {
                        out.refs.insert(word.to_string(), 1);
                    }
                }
            }
        }
        // Next: the next sibling, else the next sibling of the nearest ancestor that has one.
        let mut done = false;
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                done = true;
                break;
            }
            nest.pop();
        }
        if done {
            break;
        }
    }
    out.defs
        .sort_by(|a, b| a.line.cmp(&b.line).then_with(|| a.name.cmp(&b.name)));
    out
}

fn text_of<'a>(node: Node, src: &'a [u8]) -> &'a str {
    node.utf8_text(src).unwrap_or("")
}

/// `a::b::c` / `a.b` → the last name.
fn last_segment(name: &str) -> &str {
    name.rsplit([':', '.']).next().unwrap_or(name).trim()
}

fn signature(line: &str) -> String {
    let line = line.trim();
    if line.chars().count() <= SIGNATURE_CHARS {
        return line.to_string();
    }
    let mut cut: String = line.chars().take(SIGNATURE_CHARS - 1).collect();
    cut.push('…');
    cut
}

fn is_identifier(kind: &str) -> bool {
    kind.ends_with("identifier") || kind == "constant"
}

/// Nodes whose function children are methods.
fn is_type_container(lang: Lang, kind: &str) -> bool {
    match lang {
        Lang::Rust => matches!(kind, "impl_item" | "trait_item"),
        Lang::Cpp => matches!(kind, "class_specifier" | "struct_specifier"),
        _ => false,
    }
}

/// Whether `node` defines something, and the node holding its name.
fn classify<'t>(
    lang: Lang,
    node: Node<'t>,
    in_type: bool,
    in_fn: bool,
    src: &[u8],
) -> Option<(Kind, Node<'t>)> {
    let kind = node.kind();
    let named = |k: Kind| node.child_by_field_name("name").map(|n| (k, n));
    let callable = if in_type {
        Kind::Method
    } else {
        Kind::Function
    };
    match lang {
        Lang::Rust => match kind {
            "function_item" | "function_signature_item" => named(callable),
            "struct_item" | "enum_item" | "union_item" | "type_item" => named(Kind::Type),
            "trait_item" => named(Kind::Interface),
            "const_item" | "static_item" => named(Kind::Constant),
            "mod_item" => named(Kind::Module),
            "macro_definition" => named(Kind::Macro),
            _ => None,
        },
        Lang::Python => match kind {
            "function_definition" => named(callable),
            "class_definition" => named(Kind::Type),
            "expression_statement" if !in_type && !in_fn => {
                let parent = node.parent()?;
                if parent.kind() != "module" {
                    return None;
                }
                let assign = node.named_child(0)?;
                if assign.kind() != "assignment" {
                    return None;
                }
                let left = assign.child_by_field_name("left")?;
                let name = text_of(left, src);
                (left.kind() == "identifier" && !name.starts_with("__"))
                    .then_some((Kind::Constant, left))
            }
            _ => None,
        },
        Lang::JavaScript | Lang::TypeScript | Lang::Tsx => match kind {
            "function_declaration" | "generator_function_declaration" | "function_signature" => {
                named(Kind::Function)
            }
            "class_declaration" | "abstract_class_declaration" => named(Kind::Type),
            "method_definition" | "method_signature" | "abstract_method_signature" => {
                named(Kind::Method)
            }
            "interface_declaration" => named(Kind::Interface),
            "type_alias_declaration" | "enum_declaration" => named(Kind::Type),
            "internal_module" | "module" => named(Kind::Module),
            "variable_declarator" if !in_fn && !in_type => {
                let declaration = node.parent()?;
                let holder = declaration.parent()?;
                if !matches!(holder.kind(), "program" | "export_statement") {
                    return None;
                }
                let name = node.child_by_field_name("name")?;
                if name.kind() != "identifier" {
                    return None;
                }
                let value = node.child_by_field_name("value");
                let k = match value.map(|v| v.kind()) {
                    Some("arrow_function" | "function_expression" | "function") => Kind::Function,
                    _ => Kind::Constant,
                };
                Some((k, name))
            }
            _ => None,
        },
        Lang::Go => match kind {
            "function_declaration" => named(Kind::Function),
            "method_declaration" => named(Kind::Method),
            "type_spec" | "type_alias" => {
                let k = match node.child_by_field_name("type").map(|t| t.kind()) {
                    Some("interface_type") => Kind::Interface,
                    _ => Kind::Type,
                };
                named(k)
            }
            "const_spec" => named(Kind::Constant),
            _ => None,
        },
        Lang::Java => match kind {
            "class_declaration"
            | "enum_declaration"
            | "record_declaration"
            | "annotation_type_declaration" => named(Kind::Type),
            "interface_declaration" => named(Kind::Interface),
            "method_declaration" | "constructor_declaration" => named(Kind::Method),
            "field_declaration" => {
                let mut cursor = node.walk();
                let modifiers = node
                    .children(&mut cursor)
                    .find(|c| c.kind() == "modifiers")
                    .map(|m| text_of(m, src))?;
                if !(modifiers.contains("static") && modifiers.contains("final")) {
                    return None;
                }
                let declarator = node.child_by_field_name("declarator")?;
                declarator
                    .child_by_field_name("name")
                    .map(|n| (Kind::Constant, n))
            }
            _ => None,
        },
        Lang::C | Lang::Cpp => match kind {
            "function_definition" => {
                let name = declarator_name(node.child_by_field_name("declarator")?)?;
                let qualified = name
                    .parent()
                    .is_some_and(|p| p.kind() == "qualified_identifier");
                let k = if in_type || qualified || name.kind() == "field_identifier" {
                    Kind::Method
                } else {
                    Kind::Function
                };
                Some((k, name))
            }
            "declaration" | "field_declaration" if !in_fn => {
                // A prototype: a declaration whose declarator is a function declarator.
                let declarator = node.child_by_field_name("declarator")?;
                if !has_function_declarator(declarator) {
                    return None;
                }
                let name = declarator_name(declarator)?;
                Some((callable, name))
            }
            "struct_specifier" | "union_specifier" | "enum_specifier" | "class_specifier" => {
                node.child_by_field_name("body")?;
                named(Kind::Type)
            }
            "type_definition" => {
                let declarator = node.child_by_field_name("declarator")?;
                declarator_name(declarator).map(|n| (Kind::Type, n))
            }
            "preproc_def" | "preproc_function_def" => named(Kind::Macro),
            "namespace_definition" => named(Kind::Module),
            "alias_declaration" => named(Kind::Type),
            _ => None,
        },
    }
}

/// Follows a C/C++ declarator chain (pointer, function, array, parenthesized, reference) to
/// the name it declares.
fn declarator_name(mut node: Node) -> Option<Node> {
    for _ in 0..16 {
        match node.kind() {
            "identifier" | "field_identifier" | "type_identifier" | "destructor_name"
            | "operator_name" | "primitive_type" => return Some(node),
            "qualified_identifier" => {
                node = node.child_by_field_name("name")?;
            }
            _ => {
                node = node
                    .child_by_field_name("declarator")
                    .or_else(|| node.named_child(0))?;
            }
        }
    }
    None
}

fn has_function_declarator(mut node: Node) -> bool {
    for _ in 0..16 {
        if node.kind() == "function_declarator" {
            return true;
        }
        match node.child_by_field_name("declarator") {
            Some(next) => node = next,
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defs(lang: Lang, text: &str) -> Vec<(String, Kind, u32)> {
        parse_source(lang, text)
            .defs
            .into_iter()
            .map(|d| (d.name, d.kind, d.line))
            .collect()
    }

    fn names(lang: Lang, text: &str) -> Vec<(String, Kind)> {
        defs(lang, text)
            .into_iter()
            .map(|(n, k, _)| (n, k))
            .collect()
    }

    fn n(name: &str, kind: Kind) -> (String, Kind) {
        (name.to_string(), kind)
    }

    #[test]
    fn rust_definitions_and_references() {
        let text = "pub struct Point { x: i32 }\n\
                    pub trait Shape { fn area(&self) -> f64; }\n\
                    impl Shape for Point {\n    fn area(&self) -> f64 { helper(1) }\n}\n\
                    pub const LIMIT: usize = 3;\n\
                    pub fn helper(n: i32) -> f64 { n as f64 }\n";
        let parse = parse_source(Lang::Rust, text);
        assert!(!parse.errors);
        let got: Vec<_> = parse
            .defs
            .iter()
            .map(|d| (d.name.as_str(), d.kind))
            .collect();
        assert_eq!(
            got,
            [
                ("Point", Kind::Type),
                ("Shape", Kind::Interface),
                ("area", Kind::Method),
                ("area", Kind::Method),
                ("LIMIT", Kind::Constant),
                ("helper", Kind::Function)
            ]
        );
        assert_eq!(
            parse.defs[5].signature,
            "pub fn helper(n: i32) -> f64 { n as f64 }"
        );
        assert_eq!(parse.defs[5].line, 7);
        assert!(parse.defs[0].top_level && !parse.defs[2].top_level);
        // References: uses, not the definitions' own names.
        assert_eq!(parse.refs.get("helper"), Some(&1));
        assert_eq!(parse.refs.get("Shape"), Some(&1));
        assert_eq!(parse.refs.get("Point"), Some(&1));
    }

    #[test]
    fn python_definitions() {
        let text = "import os\nLIMIT = 3\nclass App:\n    def run(self):\n        helper()\n\
                    \ndef helper():\n    pass\n";
        assert_eq!(
            names(Lang::Python, text),
            [
                n("LIMIT", Kind::Constant),
                n("App", Kind::Type),
                n("run", Kind::Method),
                n("helper", Kind::Function)
            ]
        );
    }

    #[test]
    fn typescript_javascript_definitions() {
        let ts = "export interface Shape { area(): number }\n\
                  export type Id = string;\n\
                  export class Box implements Shape { area(): number { return 1 } }\n\
                  export const make = (n: number) => new Box();\n\
                  export enum Color { Red }\n\
                  function local() {}\n";
        assert_eq!(
            names(Lang::TypeScript, ts),
            [
                n("Shape", Kind::Interface),
                n("area", Kind::Method),
                n("Id", Kind::Type),
                n("Box", Kind::Type),
                n("area", Kind::Method),
                n("make", Kind::Function),
                n("Color", Kind::Type),
                n("local", Kind::Function)
            ]
        );
        let tsx = "export function View(): JSX.Element { return <div/> }\n";
        assert_eq!(names(Lang::Tsx, tsx), [n("View", Kind::Function)]);
        let js = "const LIMIT = 3;\nclass A { run() {} }\nfunction go() { return new A() }\n";
        assert_eq!(
            names(Lang::JavaScript, js),
            [
                n("LIMIT", Kind::Constant),
                n("A", Kind::Type),
                n("run", Kind::Method),
                n("go", Kind::Function)
            ]
        );
    }

    #[test]
    fn go_java_definitions() {
        let go = "package a\nconst Limit = 3\ntype Shape interface { Area() float64 }\n\
                  type Box struct{}\nfunc (b Box) Area() float64 { return 1 }\nfunc New() Box { return Box{} }\n";
        assert_eq!(
            names(Lang::Go, go),
            [
                n("Limit", Kind::Constant),
                n("Shape", Kind::Interface),
                n("Box", Kind::Type),
                n("Area", Kind::Method),
                n("New", Kind::Function)
            ]
        );
        let java = "public interface Shape { double area(); }\n\
                    public class Box implements Shape {\n  static final int LIMIT = 3;\n\
                    public double area() { return 1; }\n}\n";
        assert_eq!(
            names(Lang::Java, java),
            [
                n("Shape", Kind::Interface),
                n("area", Kind::Method),
                n("Box", Kind::Type),
                n("LIMIT", Kind::Constant),
                n("area", Kind::Method)
            ]
        );
    }

    #[test]
    fn c_cpp_definitions() {
        let c = "#define LIMIT 3\nstruct point { int x; };\ntypedef struct point point_t;\n\
                 int area(const point_t *p);\nstatic int\nhelper(int n) { return area(0); }\n";
        assert_eq!(
            names(Lang::C, c),
            [
                n("LIMIT", Kind::Macro),
                n("point", Kind::Type),
                n("point_t", Kind::Type),
                n("area", Kind::Function),
                n("helper", Kind::Function)
            ]
        );
        let cpp = "namespace geo {\nclass Box {\n public:\n  double area() const;\n};\n\
                   double Box::area() const { return 1; }\n}\n";
        assert_eq!(
            names(Lang::Cpp, cpp),
            [
                n("geo", Kind::Module),
                n("Box", Kind::Type),
                n("area", Kind::Method),
                n("area", Kind::Method)
            ]
        );
    }

    #[test]
    fn a_file_that_does_not_parse_is_mapped_partially() {
        let text = "pub fn good() {}\nfn broken( {\n\npub struct Kept;\n";
        let parse = parse_source(Lang::Rust, text);
        assert!(parse.errors);
        let got: Vec<_> = parse.defs.iter().map(|d| d.name.as_str()).collect();
        assert!(got.contains(&"good"), "{got:?}");
    }

    #[test]
    fn long_signatures_are_cut() {
        let text = format!("fn f(a: u8) -> u8 {{ {} 1 }}\n", "0+".repeat(200));
        let parse = parse_source(Lang::Rust, &text);
        assert_eq!(parse.defs[0].signature.chars().count(), SIGNATURE_CHARS);
        assert!(parse.defs[0].signature.ends_with('…'));
    }
}
