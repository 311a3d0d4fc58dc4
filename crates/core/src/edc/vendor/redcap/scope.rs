//! What a REDCap token may export, told from what it exports. REDCap
//! narrows an export without saying so (REDCap's API help, "Export
//! Records": with "De-Identified" or "Remove all tagged Identifier fields"
//! rights "some data fields *might* be removed"; a user in a data access
//! group exports its group's records only, and no
//! `redcap_data_access_group` column). The project's own description
//! (`content=exportFieldNames`, `content=dag`) says what a full export
//! holds; a batch whose rows lack a field, or the group column while the
//! project has groups and the export asked for it, comes from a restricted
//! token. Unless the policy declares that scope, the batch is refused
//! before it lands, naming what is missing.

use std::collections::BTreeSet;

use crate::config::RestrictedScope;

/// The project as a full export sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scope {
    /// Every field's export name (a checkbox's options each their own).
    fields: Vec<String>,
    /// Whether the project has data access groups.
    groups: bool,
}

/// The column a full export adds with `exportDataAccessGroups=true`.
const GROUP_COLUMN: &str = "redcap_data_access_group";

impl Scope {
    /// The scope in the answers to `content=exportFieldNames` and
    /// `content=dag` (JSON arrays).
    pub(crate) fn of(field_names: &[u8], groups: &[u8]) -> Result<Scope, String> {
        let names: Vec<serde_json::Value> = serde_json::from_slice(field_names)
            .map_err(|e| format!("the answer to content=exportFieldNames is not a JSON array: {e}"))?;
        let fields = names
            .iter()
            .map(|n| {
                n.get("export_field_name")
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
                    .ok_or("an entry of content=exportFieldNames has no export_field_name")
            })
            .collect::<Result<Vec<_>, _>>()?;
        let groups: Vec<serde_json::Value> = serde_json::from_slice(groups)
            .map_err(|e| format!("the answer to content=dag is not a JSON array: {e}"))?;
        Ok(Scope {
            fields,
            groups: !groups.is_empty(),
        })
    }

    /// What a batch whose rows have `columns` lacks of a full export, less
    /// what the policy `declared` the token may not export; `None` when
    /// nothing. `groups_asked`: the export asked for the group column.
    pub(crate) fn restricted(
        &self,
        columns: &BTreeSet<String>,
        groups_asked: bool,
        declared: &RestrictedScope,
    ) -> Option<String> {
        let missing: Vec<&str> = self
            .fields
            .iter()
            .filter(|f| !columns.contains(*f) && !declared.fields.contains(*f))
            .map(String::as_str)
            .collect();
        let no_group = self.groups && groups_asked && !columns.contains(GROUP_COLUMN) && !declared.one_group;
        let mut said = Vec::new();
        if !missing.is_empty() {
            said.push(format!(
                "the export lacks {} of the project's fields ({}): the token's export rights are de-identified or \
                 remove identifier fields",
                missing.len(),
                missing.join(", ")
            ));
        }
        if no_group {
            said.push(
                "the project has data access groups and the export has no redcap_data_access_group column: the \
                 token's user is in a group and exports that group's records only"
                    .to_string(),
            );
        }
        (!said.is_empty()).then(|| said.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Scope {
        Scope::of(
            br#"[{"original_field_name":"record_id","choice_value":"","export_field_name":"record_id"},
                 {"original_field_name":"dob","choice_value":"","export_field_name":"dob"},
                 {"original_field_name":"race","choice_value":"1","export_field_name":"race___1"}]"#,
            br#"[{"data_access_group_name":"Site A","unique_group_name":"site_a"}]"#,
        )
        .unwrap()
    }

    fn columns(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_restricted_export_is_named_unless_declared() {
        let full = columns(&[
            "record_id",
            "dob",
            "race___1",
            "redcap_data_access_group",
            "extra",
        ]);
        let none = RestrictedScope::default();
        assert_eq!(scope().restricted(&full, true, &none), None);
        let deidentified = columns(&["record_id", "race___1", "redcap_data_access_group"]);
        let said = scope().restricted(&deidentified, true, &none).unwrap();
        assert!(said.contains("lacks 1 of the project's fields (dob)"), "{said}");
        let grouped = columns(&["record_id", "dob", "race___1"]);
        let said = scope().restricted(&grouped, true, &none).unwrap();
        assert!(said.contains("is in a group"), "{said}");
        // Not asked for, the group column says nothing.
        assert_eq!(scope().restricted(&grouped, false, &none), None);
        let declared = RestrictedScope {
            fields: vec!["dob".into()],
            one_group: true,
        };
        assert_eq!(
            scope().restricted(&columns(&["record_id", "race___1"]), true, &declared),
            None
        );
        assert!(Scope::of(b"<html>", b"[]").is_err());
    }
}
