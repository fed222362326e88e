//! Who is in which group, and which recovery coordinator looks after whom.
//!
//! HydEE splits the processes into groups (T:1928, `guermouche-2011-thesis-send-determinism-hydee.txt` line 1928):
//! coordinated checkpoints inside a group, logging across groups. The distributed recovery of Fig 6.7 (T:2099–2103)
//! gives each recovery coordinator a subset of the processes. Both maps are configuration, fixed for a job: every
//! process and every coordinator holds the same [`Topology`].

use serde::{Deserialize, Serialize};

use crate::{CoordinatorId, Error, GroupId, Rank, Result};

/// The rank → group and rank → coordinator maps of a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// `group_of[r]` is rank `r`'s group; every id in `0..members.len()` is used.
    group_of: Vec<GroupId>,
    /// `members[g]` lists the ranks of group `g`, ascending, never empty.
    members: Vec<Vec<Rank>>,
    /// `coordinator_of[r]` is the recovery coordinator that owns rank `r`; every id below `coordinators` is used.
    coordinator_of: Vec<CoordinatorId>,
    /// `owned[c]` lists the ranks coordinator `c` owns, ascending, never empty.
    owned: Vec<Vec<Rank>>,
}

fn index_lists(ids: &[u32], what: &'static str) -> Result<Vec<Vec<Rank>>> {
    let count = ids.iter().map(|&g| g as usize + 1).max().unwrap_or(0);
    let mut lists = vec![Vec::new(); count];
    for (rank, &id) in ids.iter().enumerate() {
        let rank = Rank::try_from(rank).map_err(|_| Error::InvalidTopology("more than 2^32 ranks"))?;
        lists[id as usize].push(rank);
    }
    if lists.iter().any(Vec::is_empty) {
        return Err(Error::InvalidTopology(what));
    }
    Ok(lists)
}

impl Topology {
    /// A topology with one recovery coordinator (the centralised recovery of Fig 6.6).
    ///
    /// ```
    /// use nemesis_ft::Topology;
    /// let t = Topology::new(vec![0, 0, 1, 1]).unwrap();
    /// assert_eq!(t.group_of(2).unwrap(), 1);
    /// assert_eq!(t.members(0).unwrap(), &[0, 1]);
    /// ```
    pub fn new(group_of: Vec<GroupId>) -> Result<Self> {
        let n = group_of.len();
        Self::with_coordinators(group_of, vec![0; n])
    }

    /// A topology whose ranks are shared among several recovery coordinators (the distributed recovery of Fig 6.7).
    pub fn with_coordinators(group_of: Vec<GroupId>, coordinator_of: Vec<CoordinatorId>) -> Result<Self> {
        if group_of.is_empty() {
            return Err(Error::InvalidTopology("no ranks"));
        }
        if coordinator_of.len() != group_of.len() {
            return Err(Error::InvalidTopology("the coordinator map does not cover every rank"));
        }
        let members = index_lists(&group_of, "group ids must be dense: some id below the largest has no member")?;
        let owned = index_lists(&coordinator_of, "coordinator ids must be dense: some coordinator owns no rank")?;
        Ok(Topology { group_of, members, coordinator_of, owned })
    }

    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        self.group_of.len()
    }

    /// Number of groups.
    pub fn groups(&self) -> usize {
        self.members.len()
    }

    /// Number of recovery coordinators.
    pub fn coordinators(&self) -> usize {
        self.owned.len()
    }

    /// Rank `rank`'s group.
    pub fn group_of(&self, rank: Rank) -> Result<GroupId> {
        self.group_of.get(rank as usize).copied().ok_or(Error::UnknownRank { rank, ranks: self.ranks() })
    }

    /// The ranks of group `group`, ascending.
    pub fn members(&self, group: GroupId) -> Result<&[Rank]> {
        self.members.get(group as usize).map(Vec::as_slice).ok_or(Error::UnknownGroup { group, groups: self.groups() })
    }

    /// The recovery coordinator that owns `rank`.
    pub fn coordinator_of(&self, rank: Rank) -> Result<CoordinatorId> {
        self.coordinator_of.get(rank as usize).copied().ok_or(Error::UnknownRank { rank, ranks: self.ranks() })
    }

    /// The ranks coordinator `coordinator` owns, ascending.
    pub fn owned_by(&self, coordinator: CoordinatorId) -> Result<&[Rank]> {
        self.owned
            .get(coordinator as usize)
            .map(Vec::as_slice)
            .ok_or(Error::UnknownCoordinator { coordinator, coordinators: self.coordinators() })
    }

    /// The whole rank → group map.
    pub fn group_map(&self) -> &[GroupId] {
        &self.group_of
    }

    /// The groups a recovery round restarts, checked (known, at least one) and deduplicated.
    pub fn restart_set(&self, groups: &[GroupId]) -> Result<std::collections::BTreeSet<GroupId>> {
        let mut set = std::collections::BTreeSet::new();
        for &g in groups {
            self.members(g)?;
            set.insert(g);
        }
        if set.is_empty() {
            return Err(Error::InvalidTopology("a recovery round restarts at least one group"));
        }
        Ok(set)
    }
}

/// Reads a groups file: one line `<rank> <group>` per rank of a job of `ranks` ranks, what `nemesis-ft groups`
/// prints (blank lines and lines starting with `#` are skipped). Group labels are any non-negative integers; the
/// result numbers groups densely by their lowest rank (rank 0 is in group 0), as [`Topology::new`] wants them. A
/// bad line, an unknown, repeated or missing rank is a typed error naming the line or the rank.
///
/// ```
/// let groups = nemesis_ft::topology::parse_groups("0 7\n1 7\n2 3\n# comment\n3 3\n", 4)?;
/// assert_eq!(groups, vec![0, 0, 1, 1]);
/// assert!(nemesis_ft::topology::parse_groups("0 0\n1 0\n", 3).is_err()); // rank 2 missing
/// # Ok::<(), nemesis_ft::Error>(())
/// ```
pub fn parse_groups(text: &str, ranks: usize) -> Result<Vec<GroupId>> {
    // (label, line) per rank.
    let mut given: Vec<Option<(u64, usize)>> = vec![None; ranks];
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let t = raw.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let bad = |reason| Error::GroupsLine { line, text: raw.to_owned(), reason };
        let mut words = t.split_whitespace();
        let (Some(r), Some(g)) = (words.next(), words.next()) else {
            return Err(bad("two numbers expected"));
        };
        if words.next().is_some() {
            return Err(bad("more than two fields"));
        }
        let rank: u64 = r.parse().map_err(|_| bad("the rank is not a non-negative integer"))?;
        let label: u64 = g.parse().map_err(|_| bad("the group is not a non-negative integer"))?;
        let slot = usize::try_from(rank).ok().and_then(|r| given.get_mut(r)).ok_or(Error::GroupsUnknownRank {
            line,
            rank,
            ranks,
        })?;
        if let Some((_, first)) = *slot {
            return Err(Error::GroupsDuplicateRank { line, rank: rank as Rank, first });
        }
        *slot = Some((label, line));
    }
    let mut dense: std::collections::HashMap<u64, GroupId> = std::collections::HashMap::new();
    let mut group_of = Vec::with_capacity(ranks);
    for (rank, g) in given.iter().enumerate() {
        let Some((label, _)) = *g else {
            return Err(Error::GroupsMissingRank { rank: rank as Rank });
        };
        // Ranks ascend, so a label's first rank is its lowest: ids follow lowest ranks.
        let next = dense.len() as GroupId;
        group_of.push(*dense.entry(label).or_insert(next));
    }
    Ok(group_of)
}

/// `k` groups of consecutive ranks whose sizes differ by at most one (group `i` holds ranks
/// `i·n/k .. (i+1)·n/k`), for a job that names a number of groups and no communication matrix.
///
/// ```
/// assert_eq!(nemesis_ft::topology::blocks(8, 3)?, vec![0, 0, 1, 1, 1, 2, 2, 2]);
/// # Ok::<(), nemesis_ft::Error>(())
/// ```
pub fn blocks(ranks: usize, k: usize) -> Result<Vec<GroupId>> {
    if k == 0 || k > ranks {
        return Err(Error::InvalidTopology("the number of groups must be between 1 and the number of ranks"));
    }
    let (n, k) = (ranks as u64, k as u64);
    let mut out = Vec::with_capacity(ranks);
    for g in 0..k {
        out.extend(std::iter::repeat_n(g as GroupId, ((g + 1) * n / k - g * n / k) as usize));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_ids_are_refused() {
        assert!(matches!(Topology::new(vec![0, 2]), Err(Error::InvalidTopology(_))));
        assert!(matches!(Topology::with_coordinators(vec![0, 0], vec![1, 1]), Err(Error::InvalidTopology(_))));
        assert!(matches!(Topology::with_coordinators(vec![0, 0], vec![0]), Err(Error::InvalidTopology(_))));
        assert!(matches!(Topology::new(vec![]), Err(Error::InvalidTopology(_))));
    }

    #[test]
    fn groups_files_are_checked() {
        assert_eq!(parse_groups("1 5\n0 5\n  2 0 \n\n", 3).unwrap(), vec![0, 0, 1]);
        let e = |text: &str| parse_groups(text, 3).unwrap_err();
        assert!(matches!(e("0 0\n1 0\n"), Error::GroupsMissingRank { rank: 2 }));
        assert!(matches!(e("0 0\n1 0\n3 1\n"), Error::GroupsUnknownRank { line: 3, rank: 3, ranks: 3 }));
        assert!(matches!(e("0 0\n1 0\n0 1\n"), Error::GroupsDuplicateRank { line: 3, rank: 0, first: 1 }));
        assert!(matches!(e("0 0\n1\n"), Error::GroupsLine { line: 2, .. }));
        assert!(matches!(e("0 0\n1 x\n"), Error::GroupsLine { line: 2, .. }));
        assert!(matches!(e("0 0 0\n"), Error::GroupsLine { line: 1, .. }));
        assert!(matches!(e("-1 0\n"), Error::GroupsLine { line: 1, .. }));
        let msg = e("0 0\n1 0\n7 1\n").to_string();
        assert!(msg.contains("line 3") && msg.contains("rank 7"), "{msg}");
    }

    #[test]
    fn consecutive_blocks() {
        assert_eq!(blocks(8, 3).unwrap(), vec![0, 0, 1, 1, 1, 2, 2, 2]);
        assert_eq!(blocks(4, 4).unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(blocks(5, 1).unwrap(), vec![0; 5]);
        assert!(blocks(3, 4).is_err());
        assert!(blocks(3, 0).is_err());
    }

    #[test]
    fn lookups_check_their_argument() {
        let t = Topology::with_coordinators(vec![1, 0, 1], vec![0, 1, 1]).unwrap();
        assert_eq!(t.members(1).unwrap(), &[0, 2]);
        assert_eq!(t.owned_by(1).unwrap(), &[1, 2]);
        assert_eq!(t.coordinator_of(0).unwrap(), 0);
        assert!(matches!(t.group_of(3), Err(Error::UnknownRank { rank: 3, ranks: 3 })));
        assert!(matches!(t.members(2), Err(Error::UnknownGroup { .. })));
        assert!(matches!(t.owned_by(2), Err(Error::UnknownCoordinator { .. })));
    }
}
