<#
.SYNOPSIS
Gateway installer for Windows PowerShell 5.1+: points Claude Code, the OpenAI Codex CLI, llm,
aider and PowerShell environment variables (a marked block in $PROFILE) at this gateway.

.DESCRIPTION
Mirrors install.sh. Every file is copied to <file>.bak-YYYYmmdd-HHMMSS before it is written,
unless it holds API keys of other providers (then no copy is made and only the gateway entry is
touched). Re-running replaces the installer's own entries. uninstall.ps1 removes them, and
deletes the files this script created once nothing else is in them.

.EXAMPLE
& ([scriptblock]::Create((irm __GATEWAY_BASE_URL__/install.ps1)))
.EXAMPLE
& ([scriptblock]::Create((irm __GATEWAY_BASE_URL__/install.ps1))) -All -DryRun
.EXAMPLE
.\install.ps1 -Key gw_ai_... -Apps claude,codex,shell,llm,aider -Models m1,m2 -Yes
#>
[CmdletBinding()]
param(
    [string]$Key,
    [string[]]$Apps,
    [string[]]$Models,
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
# Codex rejects duplicate top-level keys (and aider would take the last), so the user's own lines
# for the keys the gateway block sets are commented out with this prefix while the block is
# present; uninstall.ps1 restores them.
$DisabledPrefix = '# [gateway] '
$AllApps = @('claude', 'codex', 'shell', 'llm', 'aider')
$ClaudeKeys = @('ANTHROPIC_BASE_URL', 'ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_MODEL')
function Get-Masked([string]$Value) { return $Value.Substring(0, [Math]::Min(10, $Value.Length)) + '...' }

__GATEWAY_COMMON__

# --- the plan: files to write, filled by the Plan-* functions, written by Invoke-Plan ----------

$Plan = New-Object System.Collections.Generic.List[object]

# Queues File := New when it differs; prints the plan. Returns $true when queued.
# $Old is $null for a missing file, so it is deliberately not typed [string] (that would make it '').
function Add-PlanFile([string]$App, [string]$File, $Old, [string]$New, [string]$Stripped) {
    if ($null -ne $Old -and $Old -ceq $New) {
        Add-Summary 'ok' $App "$(Get-Tilde $File) already configured"
        return $false
    }
    $backup = $false
    if ($null -eq $Old) { $note = 'new file' }
    elseif (Test-ForeignKey $Stripped) { $note = 'no backup: it holds API keys of other providers' }
    else { $backup = $true; $note = 'backup first' }
    $Plan.Add(@{ App = $App; File = $File; New = $New; Backup = $backup; Created = ($null -eq $Old) })
    if ($DryRun) { Add-Summary 'would change' $App "$(Get-Tilde $File) ($note)" }
    else { Write-Host "  will change $(Get-Tilde $File) ($note)" }
    return $true
}

function Show-Block([string]$Text) {
    $on = $false
    foreach ($line in ($Text -split "`r?`n")) {
        if ($line -ceq $MarkBegin) { $on = $true }
        if ($on) { Write-Host ('      + ' + $line.Replace($Key, (Get-Masked $Key))) }
        elseif ($line.StartsWith($DisabledPrefix)) { Write-Host ('      ~ comments out: ' + $line.Substring($DisabledPrefix.Length)) }
        if ($line -ceq $MarkEnd) { $on = $false }
    }
}

# The lines of a text without its last empty one (the text ends with a newline).
function Get-Lines([string]$Text) {
    if (-not $Text) { return @() }
    $lines = @($Text -split "`r?`n")
    if ($Text.EndsWith("`n")) { $lines = @($lines[0..($lines.Count - 2)]) }
    return $lines
}

function Plan-Claude {
    $file = Join-Path $HomeDir '.claude\settings.json'
    $old = Read-Text $file
    $r = Edit-ClaudeSettings $old $true
    if ($r.ContainsKey('Error')) { Add-Summary 'skipped' 'claude' "$(Get-Tilde $file): $($r.Error)"; return }
    if (Add-PlanFile 'claude' $file $old $r.New $r.Stripped) {
        Write-Host "      + env.ANTHROPIC_BASE_URL = $BaseUrl"
        Write-Host "      + env.ANTHROPIC_AUTH_TOKEN = $(Get-Masked $Key)"
        Write-Host "      + env.ANTHROPIC_MODEL = $DefaultModel"
    }
}

function Plan-Codex {
    $file = Join-Path $HomeDir '.codex\config.toml'
    $old = Read-Text $file
    $s = Remove-GatewayBlocks $old -Restore
    if ($s.Broken) { Add-Summary 'skipped' 'codex' "$(Get-Tilde $file) has a '$MarkBegin' line without '$MarkEnd'; fix it by hand"; return }
    if ($s.Text -match '(?m)^\s*\[model_providers\.gateway\]') { Add-Summary 'skipped' 'codex' "$(Get-Tilde $file) already defines its own [model_providers.gateway]; left alone"; return }
    $nl = Get-Newline $old
    # Top-level keys must precede every table, so the model lines go first and the provider table last.
    $lines = New-Object System.Collections.Generic.List[string]
    $lines.Add($MarkBegin)
    $lines.Add("# Added by the gateway installer ($BaseUrl); uninstall.ps1 removes it.")
    $lines.Add("model = `"$DefaultModel`"")
    $lines.Add('model_provider = "gateway"')
    $lines.Add($MarkEnd)
    $inTable = $false
    foreach ($line in (Get-Lines $s.Text)) {
        if ($line -match '^\s*\[') { $inTable = $true }
        if (-not $inTable -and $line -match '^\s*(model|model_provider)\s*=') { $lines.Add($DisabledPrefix + $line) } else { $lines.Add($line) }
    }
    $lines.Add($MarkBegin)
    $lines.Add('[model_providers.gateway]')
    $lines.Add('name = "Gateway"')
    $lines.Add("base_url = `"$BaseUrl/v1`"")
    $lines.Add('env_key = "GATEWAY_API_KEY"')
    $lines.Add('wire_api = "responses"')
    $lines.Add($MarkEnd)
    $new = ($lines -join $nl) + $nl
    if (Add-PlanFile 'codex' $file $old $new $s.Text) { Show-Block $new }
    if ($script:ChosenApps -notcontains 'shell') { Write-Host '      note: codex reads the key from $env:GATEWAY_API_KEY; add the shell app or set it yourself' }
}

# llm (Simon Willison's CLI): an extra-openai-models.yaml entry per chosen model (gateway/<model>)
# and the key in keys.json under "gateway", which those entries name: llm would otherwise fall
# back to OPENAI_API_KEY, which may be the user's own OpenAI key.
function Plan-Llm {
    $dir = Get-LlmDir
    $file = Join-Path $dir 'extra-openai-models.yaml'
    $keysFile = Join-Path $dir 'keys.json'
    $old = Read-Text $file
    $s = Remove-GatewayBlocks $old
    if ($s.Broken) { Add-Summary 'skipped' 'llm' "$(Get-Tilde $file) has a '$MarkBegin' line without '$MarkEnd'; fix it by hand"; return }
    # The entries join the file's list: only a block list at column 0 (or an empty file) takes them.
    $seen = $false; $bad = $false
    foreach ($line in (Get-Lines $s.Text)) {
        if ($line -match '^\s*(#|$)') { continue }
        if (-not $seen -and -not $line.StartsWith('- ')) { $bad = $true }
        $seen = $true
        if ($line -match '^\S' -and -not $line.StartsWith('- ')) { $bad = $true }
    }
    if ($bad) { Add-Summary 'skipped' 'llm' "$(Get-Tilde $file) is not a list of '- model_id: ...' entries at column 0; add the gateway's by hand"; return }
    $keysOld = Read-Text $keysFile
    $k = Edit-LlmKeys $keysOld $true
    if ($k.ContainsKey('Error')) { Add-Summary 'skipped' 'llm' "$(Get-Tilde $keysFile): $($k.Error)"; return }
    $nl = Get-Newline $old
    $lines = New-Object System.Collections.Generic.List[string]
    foreach ($line in (Get-Lines $s.Text)) { $lines.Add($line) }
    $lines.Add($MarkBegin)
    $lines.Add("# Added by the gateway installer ($BaseUrl); uninstall.ps1 removes this block.")
    foreach ($m in $script:ChosenModels) {
        $lines.Add("- model_id: $(ConvertTo-YamlString "gateway/$m")")
        $lines.Add("  model_name: $(ConvertTo-YamlString $m)")
        $lines.Add("  api_base: $(ConvertTo-YamlString "$BaseUrl/v1")")
        $lines.Add('  api_key_name: gateway')
        $lines.Add('  supports_tools: true') # every text model of the gateway takes tools (translated where needed)
    }
    $lines.Add($MarkEnd)
    $new = ($lines -join $nl) + $nl
    if (Add-PlanFile 'llm' $file $old $new $s.Text) { Show-Block $new }
    if (Add-PlanFile 'llm' $keysFile $keysOld $k.New $k.Stripped) { Write-Host "      + gateway = $(Get-Masked $Key)" }
    Write-Host "      use: llm -m gateway/$DefaultModel 'Hello'"
}

# aider: ~/.aider.conf.yml gets the OpenAI-compatible endpoint, the key and the default model
# (aider's `openai/` prefix sends it to openai-api-base).
function Plan-Aider {
    $file = Join-Path $HomeDir '.aider.conf.yml'
    $old = Read-Text $file
    $s = Remove-GatewayBlocks $old -Restore
    if ($s.Broken) { Add-Summary 'skipped' 'aider' "$(Get-Tilde $file) has a '$MarkBegin' line without '$MarkEnd'; fix it by hand"; return }
    $nl = Get-Newline $old
    $lines = New-Object System.Collections.Generic.List[string]
    foreach ($line in (Get-Lines $s.Text)) {
        if ($line -match '^(model|openai-api-base|openai-api-key)\s*:') { $lines.Add($DisabledPrefix + $line) } else { $lines.Add($line) }
    }
    $lines.Add($MarkBegin)
    $lines.Add("# Added by the gateway installer ($BaseUrl); uninstall.ps1 removes this block.")
    $lines.Add("openai-api-base: $(ConvertTo-YamlString "$BaseUrl/v1")")
    $lines.Add("openai-api-key: $(ConvertTo-YamlString $Key)")
    $lines.Add("model: $(ConvertTo-YamlString "openai/$DefaultModel")")
    $lines.Add($MarkEnd)
    $new = ($lines -join $nl) + $nl
    if (Add-PlanFile 'aider' $file $old $new $s.Text) { Show-Block $new }
}

function Plan-Shell {
    $file = $PROFILE
    if (-not $file) { Add-Summary 'skipped' 'shell' 'this PowerShell host has no $PROFILE'; return }
    $old = Read-Text $file
    $s = Remove-GatewayBlocks $old
    if ($s.Broken) { Add-Summary 'skipped' 'shell' "$(Get-Tilde $file) has a '$MarkBegin' line without '$MarkEnd'; fix it by hand"; return }
    $nl = Get-Newline $old
    $lines = New-Object System.Collections.Generic.List[string]
    $lines.Add($MarkBegin)
    $lines.Add("# Added by the gateway installer ($BaseUrl); uninstall.ps1 removes this block.")
    $lines.Add("`$env:GATEWAY_BASE_URL = '$BaseUrl'")
    $lines.Add("`$env:GATEWAY_API_KEY = '$Key'")
    $lines.Add("`$env:GATEWAY_MODEL = '$DefaultModel'")
    $lines.Add("`$env:GATEWAY_MODELS = '$($script:ChosenModels -join ',')'")
    # A key the user sets for OpenAI itself (in the profile or the user environment) stays in charge,
    # and OpenAI tools keep going to OpenAI with it: pointing them here would send that key to the gateway.
    $userKey = [Environment]::GetEnvironmentVariable('OPENAI_API_KEY', 'User')
    if (-not ($s.Text -match '(?im)^\s*\$env:OPENAI_API_KEY\s*=|OPENAI_API_KEY[''"]\s*,') -and -not $userKey) {
        $lines.Add("`$env:OPENAI_BASE_URL = '$BaseUrl/v1'")
        $lines.Add('$env:OPENAI_API_KEY = $env:GATEWAY_API_KEY')
    }
    $lines.Add($MarkEnd)
    $body = $s.Text
    if ($body -and -not $body.EndsWith("`n")) { $body += $nl }
    $new = $body + ($lines -join $nl) + $nl
    if (Add-PlanFile 'shell' $file $old $new $s.Text) { Show-Block $new }
}

function Invoke-Plan {
    foreach ($p in $Plan) {
        $dir = Split-Path -Parent $p.File
        if (-not (Test-Path -LiteralPath $dir)) { New-Item -ItemType Directory -Path $dir -Force | Out-Null }
        if ($p.Backup) {
            $b = Get-BackupName $p.File
            Copy-Item -LiteralPath $p.File -Destination $b
            Add-Summary 'ok' 'backup' (Get-Tilde $b)
        }
        # No BOM: Node-based tools (Claude Code, Codex) do not expect one.
        [IO.File]::WriteAllText($p.File, $p.New, $Utf8NoBom)
        if ($p.Created) { Add-Created $p.File }
        Add-Summary 'ok' $p.App "wrote $(Get-Tilde $p.File)"
    }
}

# --- steps ------------------------------------------------------------------------------------

function Step-Key {
    if (-not $script:Key) { $script:Key = Read-Answer 'Gateway API key (the full key: gw_ai_..., rk_live_... or mt-...)' -Secret }
    $script:Key = "$script:Key".Trim()
    if (-not $script:Key -and $DryRun) {
        # A dry run writes nothing, so it needs no key: the plan shows placeholders, models unchecked.
        $script:Key = '<API_KEY>'
        $script:Available = @(if ($Models) { Split-List $Models } else { '<model_id>' })
        Add-Summary 'skipped' 'key' 'dry run without a key: <API_KEY> stands for it; models are not checked'
        return
    }
    if (-not $script:Key) { Fail 'no API key given' }
    if (-not ($script:Key -cmatch '^(gw_ai_|rk_live_)[A-Za-z0-9_-]{16,}$' -or $script:Key -cmatch '^mt-[A-Za-z0-9_-]{43}$')) {
        Fail 'this is not a gateway API key: paste the full key, starting with gw_ai_, rk_live_ or mt-'
    }
    try {
        $resp = Invoke-RestMethod -Uri "$BaseUrl/v1/models" -Headers @{ Authorization = "Bearer $script:Key" } -TimeoutSec 30 -UseBasicParsing
    } catch {
        $code = $null
        if ($_.Exception.PSObject.Properties['Response'] -and $_.Exception.Response) { $code = [int]$_.Exception.Response.StatusCode }
        if ($code -eq 401 -or $code -eq 403) { Fail "the gateway rejected the key (HTTP $code): check that it is the full key and that it is active" }
        if ($code) { Fail "the gateway answered HTTP $code to GET $BaseUrl/v1/models" }
        Fail "cannot reach the gateway at $BaseUrl ($($_.Exception.Message))"
    }
    $items = @($resp.data)
    $text = @($items | Where-Object { $_.PSObject.Properties['capabilities'] -and @($_.capabilities) -contains 'text' } | ForEach-Object { $_.id })
    $script:Available = @(if ($text.Count -gt 0) { $text } else { $items | ForEach-Object { $_.id } })
    if ($script:Available.Count -eq 0) { Fail 'the key may call no model' }
    Add-Summary 'ok' 'key' "$(Get-Masked $script:Key) accepted; $($script:Available.Count) models available"
}

function Step-Models {
    if ($Models) { $list = @(Split-List $Models) }
    else {
        Write-Host 'Models this key may call:'
        for ($i = 0; $i -lt $script:Available.Count; $i++) { Write-Host "  $($i + 1)) $($script:Available[$i])" }
        $list = @(Split-List @(Read-Answer 'Models (names or numbers, comma-separated; the first is the default)' $script:Available[0]))
    }
    $out = @()
    foreach ($m in $list) {
        if ($m -match '^\d+$' -and [int]$m -ge 1 -and [int]$m -le $script:Available.Count) { $m = $script:Available[[int]$m - 1] }
        if ($script:Available -cnotcontains $m) { Fail "model '$m' is not available to this key (available: $($script:Available -join ', '))" }
        if ($out -cnotcontains $m) { $out += $m }
    }
    if ($out.Count -eq 0) { Fail 'no model chosen' }
    $script:ChosenModels = $out
    $script:DefaultModel = $out[0]
    Add-Summary 'ok' 'models' ("$($out[0]) (default)" + $(if ($out.Count -gt 1) { ', ' + ($out[1..($out.Count - 1)] -join ', ') } else { '' }))
}

$BaseUrl = $BaseUrl.TrimEnd('/')
if ($BaseUrl -notmatch '^https?://[\[\]A-Za-z0-9.:-]+$') { Fail "invalid gateway address '$BaseUrl' (run the script served by the gateway, or pass -BaseUrl)" }
try { [Net.ServicePointManager]::SecurityProtocol = [Net.ServicePointManager]::SecurityProtocol -bor [Net.SecurityProtocolType]::Tls12 } catch { Write-Verbose 'TLS 1.2 setting not available' }
$Available = @(); $ChosenApps = @(); $ChosenModels = @(); $DefaultModel = ''
Write-Host ("Gateway installer for $BaseUrl" + $(if ($DryRun) { ' (dry run: nothing is written)' } else { '' }))

Step-Key
Step-Apps 'Applications to configure: claude (Claude Code), codex (Codex CLI), shell (PowerShell profile), llm, aider; comma-separated or "all"'
Step-Models
foreach ($app in $ChosenApps) {
    switch ($app) { 'claude' { Plan-Claude } 'codex' { Plan-Codex } 'shell' { Plan-Shell } 'llm' { Plan-Llm } 'aider' { Plan-Aider } }
}

if ($Plan.Count -eq 0) {
    Write-Host 'Nothing to change.'
} elseif ($DryRun) {
    Write-Host "Dry run: $($Plan.Count) file(s) would change; nothing was written."
} else {
    if (-not $Yes) {
        $answer = Read-Answer "Write $($Plan.Count) file(s)? [Y/n]"
        if ($answer -and $answer -notmatch '^[Yy]') { Write-Host 'Nothing written.'; return }
    }
    Invoke-Plan
}
Write-Host ''
Write-Host 'Summary:'
foreach ($line in $Summary) { Write-Host "  $line" }
if (-not $DryRun -and $ChosenApps -contains 'shell') { Write-Host 'Open a new PowerShell window (or run . $PROFILE) to use the variables.' }
