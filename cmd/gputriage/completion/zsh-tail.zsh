	esac
	(( CURRENT > 2 )) && case ${words[2]} in
	(collect|explain|node-check|fix|watch|help|version|completion) cmd=${words[2]} ;;
	esac
	if [[ $cur == -* ]]; then
		case $cmd in
		(collect) compadd -- %s ;;
		(explain) compadd -- %s ;;
		(node-check) compadd -- %s ;;
		(fix) compadd -- %s ;;
		(watch) compadd -- %s ;;
		('') compadd -- %s ;;
		esac
		return
	fi
	case $cmd in
	(help) (( CURRENT == 3 )) && compadd -- %s ;;
	(completion) (( CURRENT == 3 )) && compadd -- bash zsh fish ;;
	(version|explain|node-check) ;;
	(*)
		(( CURRENT == 2 )) && compadd -- %s
		compadd -- ${(f)"$(${words[1]} __complete-hosts 2>/dev/null)"}
		;;
	esac
}
if [[ ${funcstack[1]} == _gputriage ]]; then
	_gputriage "$@"
else
	compdef _gputriage gputriage
fi
