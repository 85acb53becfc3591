<#
.SYNOPSIS
Gateway uninstaller for Windows PowerShell 5.1+: removes what install.ps1 added for this gateway.

.DESCRIPTION
Mirrors uninstall.sh. Levels: entries removes the gateway entries only (every backup is kept);
reset also deletes the <file>.bak-YYYYmmdd-HHMMSS backups of those files that existed before this
run. Before a file is written it is copied to <file>.bak-YYYYmmdd-HHMMSS, unless it holds API keys
of other providers. A file install.ps1 created is deleted instead when nothing but the gateway
entries is in it.

.EXAMPLE
& ([scriptblock]::Create((irm __GATEWAY_BASE_URL__/uninstall.ps1)))
.EXAMPLE
& ([scriptblock]::Create((irm __GATEWAY_BASE_URL__/uninstall.ps1))) -All -DryRun
.EXAMPLE
.\uninstall.ps1 -Level reset -All -Yes
#>
[CmdletBinding()]
param(
    # entries | reset; asked when missing (no ValidateSet: the answer is assigned to it later)
    [string]$Level = '',
    [string[]]$Apps,
    [switch]$All,
    [switch]$DryRun,
    [switch]$Yes,
    # Filled in by the gateway that serves this file.
    [string]$BaseUrl = '__GATEWAY_BASE_URL__'
)

Set-StrictMode -Version 2.0
$ErrorActionPreference = 'Stop'

$MarkBegin = '# >>> gateway >>>'
$MarkEnd = '# <<< gateway <<<'
# install.ps1 comments out the user's own codex and aider lines with this prefix; they are restored.
$DisabledPrefix = '# [gateway] '
$AllApps = @('claude', 'codex', 'shell', 'llm', 'aider')
$ClaudeKeys = @('ANTHROPIC_BASE_URL', 'ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_MODEL')
# Only used by the shared settings editor when it sets entries, which the uninstaller never does.
$Key = ''
$DefaultModel = ''

__GATEWAY_COMMON__

# --- the plan: files to write and old backups to delete, written by Invoke-Plan ---------------

$Plan = New-Object System.Collections.Generic.List[object]
$OldBackups = New-Object System.Collections.Generic.List[string]

function Hide-GatewayKeys([string]$Line) { return [regex]::Replace($Line, '((gw_ai_|rk_live_|mt-)[A-Za-z0-9_-]{4})[A-Za-z0-9_-]+', '$1...') }

# Queues File := Stripped, or its deletion when install.ps1 created it and nothing else is in it;
# prints the plan and the lines that go away (or What).
function Add-PlanStrip([string]$App, [string]$File, [string]$Old, [string]$Stripped, [string]$What = '') {
    $backup = $false; $delete = $false
    if ((Test-HoldsNothing $Stripped) -and (Test-Created $File)) { $delete = $true; $action = 'delete it'; $note = 'the installer created it and nothing else is in it' }
    else {
        $action = 'remove the gateway entries'
        if (Test-ForeignKey $Stripped) { $note = 'no backup: it holds API keys of other providers' }
        else { $backup = $true; $note = 'backup first' }
    }
    $Plan.Add(@{ App = $App; File = $File; New = $Stripped; Backup = $backup; Delete = $delete })
    if ($DryRun) { Add-Summary 'would change' $App "$(Get-Tilde $File): $action ($note)" }
    else { Write-Host "  will ${action}: $(Get-Tilde $File) ($note)" }
    if ($What) { Write-Host $What; return }
    $on = $false
    foreach ($line in ($Old -split "`r?`n")) {
        if ($line -ceq $MarkBegin) { $on = $true }
        if ($on) { Write-Host ('      - ' + (Hide-GatewayKeys $line)) }
        elseif ($line.StartsWith($DisabledPrefix)) { Write-Host ('      ~ ' + $line.Substring($DisabledPrefix.Length)) }
        if ($line -ceq $MarkEnd) { $on = $false }
    }
}

# Old backups of File (reset level), listed before this run writes anything.
function Add-PlanBackups([string]$App, [string]$File) {
    if ($script:Level -ne 'reset') { return }
    $dir = Split-Path -Parent $File
    if (-not (Test-Path -LiteralPath $dir -PathType Container)) { return }
    $name = [regex]::Escape((Split-Path -Leaf $File))
    foreach ($b in @(Get-ChildItem -LiteralPath $dir -Force -File | Where-Object { $_.Name -match "^$name\.bak-\d{8}-\d{6}$" })) {
        $OldBackups.Add($b.FullName)
        if ($DryRun) { Add-Summary 'would change' $App "delete $(Get-Tilde $b.FullName)" }
        else { Write-Host "  will delete $(Get-Tilde $b.FullName)" }
    }
}

function Plan-Claude {
    $file = Join-Path $HomeDir '.claude\settings.json'
    Add-PlanBackups 'claude' $file
    $old = Read-Text $file
    if ($null -eq $old) { Add-Summary 'ok' 'claude' "$(Get-Tilde $file) does not exist"; return }
    $r = Edit-ClaudeSettings $old $false
    if ($r.ContainsKey('Error')) { Add-Summary 'skipped' 'claude' "$(Get-Tilde $file): $($r.Error)"; return }
    # The editor returns the text unchanged when it holds no gateway entry.
    if ($r.Stripped -ceq $old) { Add-Summary 'ok' 'claude' "$(Get-Tilde $file): no gateway entry"; return }
    Add-PlanStrip 'claude' $file $old $r.Stripped '      - env.ANTHROPIC_BASE_URL, env.ANTHROPIC_AUTH_TOKEN, env.ANTHROPIC_MODEL'
}

function Plan-Text([string]$App, [string]$File, [switch]$Restore) {
    Add-PlanBackups $App $File
    $old = Read-Text $File
    if ($null -eq $old) { Add-Summary 'ok' $App "$(Get-Tilde $File) does not exist"; return }
    $s = Remove-GatewayBlocks $old -Restore:$Restore
    if ($s.Broken) { Add-Summary 'skipped' $App "$(Get-Tilde $File) has a '$MarkBegin' line without '$MarkEnd'; fix it by hand"; return }
    if (-not $s.Found) { Add-Summary 'ok' $App "$(Get-Tilde $File): no gateway entry"; return }
    Add-PlanStrip $App $File $old $s.Text
}

function Plan-Codex { Plan-Text 'codex' (Join-Path $HomeDir '.codex\config.toml') -Restore }

function Plan-Aider { Plan-Text 'aider' (Join-Path $HomeDir '.aider.conf.yml') -Restore }

# llm: the block of extra-openai-models.yaml, and the key named "gateway" in keys.json.
function Plan-Llm {
    $dir = Get-LlmDir
    Plan-Text 'llm' (Join-Path $dir 'extra-openai-models.yaml')
    $file = Join-Path $dir 'keys.json'
    Add-PlanBackups 'llm' $file
    $old = Read-Text $file
    if ($null -eq $old) { Add-Summary 'ok' 'llm' "$(Get-Tilde $file) does not exist"; return }
    $r = Edit-LlmKeys $old $false
    if ($r.ContainsKey('Error')) { Add-Summary 'skipped' 'llm' "$(Get-Tilde $file): $($r.Error)"; return }
    if ($r.Stripped -ceq $old) { Add-Summary 'ok' 'llm' "$(Get-Tilde $file): no gateway entry"; return }
    Add-PlanStrip 'llm' $file $old $r.Stripped '      - gateway (the key llm sends to the gateway)'
}

function Plan-Shell {
    if (-not $PROFILE) { Add-Summary 'skipped' 'shell' 'this PowerShell host has no $PROFILE'; return }
    Plan-Text 'shell' $PROFILE
}

function Invoke-Plan {
    foreach ($p in $Plan) {
        $b = $null
        if ($p.Delete) {
            Remove-Item -LiteralPath $p.File -Force
            Add-Summary 'ok' $p.App "deleted $(Get-Tilde $p.File) (the installer created it)"
            continue
        }
        if ($p.Backup) {
            $b = Get-BackupName $p.File
            Copy-Item -LiteralPath $p.File -Destination $b
            Add-Summary 'ok' 'backup' (Get-Tilde $b)
        }
        # No BOM: Node-based tools (Claude Code, Codex) do not expect one.
        [IO.File]::WriteAllText($p.File, $p.New, $Utf8NoBom)
        Add-Summary 'ok' $p.App "removed the gateway entries from $(Get-Tilde $p.File)"
        # The copy guarded the write; it holds the gateway key, which a full reset removes everywhere.
        if ($p.Backup -and $script:Level -eq 'reset') {
            Remove-Item -LiteralPath $b -Force
            Add-Summary 'ok' 'reset' "deleted $(Get-Tilde $b) (it held the gateway key)"
        }
    }
    # The backups listed before this run.
    foreach ($b in $OldBackups) {
        Remove-Item -LiteralPath $b -Force
        Add-Summary 'ok' 'reset' "deleted $(Get-Tilde $b)"
    }
    # A file whose entries are gone is the user's from now on (or deleted): no longer listed.
    foreach ($p in $Plan) { Remove-Created $p.File }
}

# --- steps ------------------------------------------------------------------------------------

function Step-Level {
    if (-not $script:Level) {
        Write-Host 'What should be removed?'
        Write-Host '  1) entries: the gateway entries only; every backup is kept'
        Write-Host '  2) reset:   the gateway entries and the old .bak-* backups of those files'
        $script:Level = Read-Answer 'Level (1/entries or 2/reset)' '1'
    }
    switch ($script:Level) {
        { $_ -in '1', 'entries' } { $script:Level = 'entries'; break }
        { $_ -in '2', 'reset' } { $script:Level = 'reset'; break }
        default { Fail "unknown level '$($script:Level)' (entries or reset)" }
    }
    Add-Summary 'ok' 'level' $script:Level
}

$BaseUrl = $BaseUrl.TrimEnd('/')
if ($BaseUrl -notmatch '^https?://[\[\]A-Za-z0-9.:-]+$') { Fail "invalid gateway address '$BaseUrl' (run the script served by the gateway, or pass -BaseUrl)" }
$ChosenApps = @()
Write-Host ("Gateway uninstaller for $BaseUrl" + $(if ($DryRun) { ' (dry run: nothing is changed)' } else { '' }))

Step-Level
Step-Apps 'Applications to clean: claude, codex, shell, llm, aider; comma-separated or "all"'
foreach ($app in $ChosenApps) {
    switch ($app) { 'claude' { Plan-Claude } 'codex' { Plan-Codex } 'shell' { Plan-Shell } 'llm' { Plan-Llm } 'aider' { Plan-Aider } }
}

if ($Plan.Count + $OldBackups.Count -eq 0) {
    Write-Host 'Nothing to remove.'
} elseif ($DryRun) {
    Write-Host "Dry run: $($Plan.Count) file(s) would change, $($OldBackups.Count) backup(s) would be deleted; nothing was changed."
} else {
    if (-not $Yes) {
        $answer = Read-Answer "Change $($Plan.Count) file(s) and delete $($OldBackups.Count) backup(s)? [Y/n]"
        if ($answer -and $answer -notmatch '^[Yy]') { Write-Host 'Nothing changed.'; return }
    }
    Invoke-Plan
}
Write-Host ''
Write-Host 'Summary:'
foreach ($line in $Summary) { Write-Host "  $line" }
